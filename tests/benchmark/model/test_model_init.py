"""`pflkit model init`: a random VT5 of a named shape with the shipped tokenizer, loadable."""

from __future__ import annotations

import math

from click.testing import CliRunner

from benchmark.model import load_model, load_processor
from benchmark.model.family_checkpoint import expected_tensor_spec


def test_init_writes_a_loadable_model_and_refuses_an_existing_directory(tmp_path):
    from pflkit.cli import main

    out = tmp_path / "tiny"
    result = CliRunner().invoke(main, ["model", "init", "--shape", "tiny", "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = load_model(out)
    values = sum(math.prod(dims) for dims, _ in expected_tensor_spec(model.config).values())
    assert f"{values:,} parameters, tie_lm_head=True" in result.output
    assert len(load_processor(out).tokenizer) == load_processor("base").tokenizer.__len__()
    again = CliRunner().invoke(main, ["model", "init", "--shape", "tiny", "--out", str(out)])
    assert again.exit_code == 1 and "already exists; choose a new directory" in again.output
    unknown = CliRunner().invoke(main, ["model", "init", "--shape", "t5-xl", "--out",
                                        str(tmp_path / "x")])
    assert unknown.exit_code == 2 and "'t5-xl' is not one of 'vt5-base', 'tiny'" in unknown.output
