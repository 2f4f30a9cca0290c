"""A wire format is one file, found by scanning ``benchmark/wire_formats/``.

The formats here exist only in this test: a module written to a temporary folder that the test
adds to the package's path, then discovered as the kit's own are. ``toy-fp16`` (every value
as 2 bytes) is trained with ``pflkit train --wire toy-fp16`` (in-process, one round on `tiny`,
from a small random reference) and the real worker checks the run's byte counts with the
format's formula: the honest log is bound and scored, one byte less per message is rejected.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import benchmark.wire_formats as wire_formats
from baselines.cli import train
from baselines.config import TrainConfig
from baselines.wire import CastCodec, get_codec
from benchmark.wire_formats import UnknownWireFormat, wire_format
from evaluator.validation.commdetails import DetailedMessage
from evaluator.validation.errors import InvalidSubmission
from evaluator.validation.noise_floor import uplink_rounds
from evaluator.worker import JobRunner
from tests.evaluator.factories import store_run
from tests.evaluator.test_binding import outcome
from tests.evaluator.test_binding import runner as binding_runner
from tests.small_model import save_small_reference

#: the binding tests' worker fixture (the real worker on the `tiny` test split)
runner = binding_runner

#: the whole of two wire formats: what a new format's file holds.
TOY_FORMATS = '''
import math

from benchmark.wire_formats.base import CastFormat, WireFormat


class ToyFp16(CastFormat):
    """Half precision: every value as 2 bytes (lossy)."""

    name = "toy-fp16"
    cast_dtype = "float16"
    bytes_per_value = 2


class ToyCopy(CastFormat):
    """fp32 under another name: 4 bytes a value, decoded exactly."""

    name = "toy-copy"
    lossless = True
    cast_dtype = "float32"
    bytes_per_value = 4


class ToyInt8(WireFormat):
    """A size formula without a codec: 1 byte a value plus a 4-byte scale per tensor."""

    name = "toy-int8"

    def data_bytes(self, shapes):
        return sum(math.prod(shape) + 4 for shape in shapes)
'''
MODULE = "toy_formats"
TRAIN = ("--rounds", "1", "--local-epochs", "1", "--val-limit", "0", "--threads", "1",
         "--no-progress", "--clients-per-round", "1", "--preset", "fedavg")  # fmt: skip


@contextmanager
def toy_formats_registered(folder: Path) -> Iterator[None]:
    """``benchmark/wire_formats/`` as if it held :data:`TOY_FORMATS` as one more module."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{MODULE}.py").write_text(TOY_FORMATS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wire_formats, "__path__", [*wire_formats.__path__, str(folder)])
        try:
            patch.setattr(wire_formats, "WIRE_FORMATS", wire_formats.discover_formats())
            yield
        finally:
            sys.modules.pop(f"{wire_formats.__name__}.{MODULE}", None)
            vars(wire_formats).pop(MODULE, None)


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[None]:
    """The toy formats, for one test."""
    with toy_formats_registered(tmp_path / "formats"):
        yield


@pytest.fixture(scope="module")
def toy_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The toy formats, for the trained run and the worker's checks of it."""
    with toy_formats_registered(tmp_path_factory.mktemp("formats")):
        yield


def test_the_kit_does_not_know_the_toy_formats_and_says_which_it_knows() -> None:
    with pytest.raises(UnknownWireFormat, match=r"'toy-fp16' has no size formula; the evaluator "
                       r"knows fp32, nf4, nf4-B \(B in 128, "):  # fmt: skip
        wire_format("toy-fp16")
    with pytest.raises(ValueError, match=r"unknown wire format 'toy-fp16'; choose one of fp32, "):
        get_codec("toy-fp16")
    with pytest.raises(ValueError, match="unknown wire format 'toy-fp16'"):
        TrainConfig(wire="toy-fp16")


def test_a_format_file_is_discovered_with_its_formula_and_a_derived_codec(toy) -> None:  # type: ignore[no-untyped-def]
    assert {"toy-copy", "toy-fp16", "toy-int8"} <= set(wire_formats.WIRE_FORMATS)
    assert "toy-fp16" in wire_formats.known_formats()
    half = wire_format("toy-fp16")
    assert half.data_bytes([(3, 5), (7,)]) == 2 * 22
    assert not half.lossless and wire_format("toy-copy").lossless
    codec = get_codec("toy-fp16")
    assert type(codec) is CastCodec and codec.name == "toy-fp16"
    tensors = {"a": torch.randn(3, 5), "b": torch.randn(7)}
    message = codec.encode(tensors)
    assert (message.format, message.data_bytes) == ("toy-fp16", 44)
    decoded = codec.decode(message)
    for name, tensor in tensors.items():
        assert decoded[name].dtype == torch.float32
        assert torch.equal(decoded[name], tensor.to(torch.float16).to(torch.float32))
    assert TrainConfig(wire="toy-fp16").build_codec().name == "toy-fp16"


def test_a_format_that_is_no_cast_needs_a_codec_file(toy) -> None:  # type: ignore[no-untyped-def]
    assert wire_format("toy-int8").data_bytes([(10,), (2, 3)]) == 14 + 10
    expected = (r"wire format 'toy-int8' has a size formula \(benchmark.wire_formats.toy_formats\) "
                r"but no codec: add a WireCodec subclass with name = 'toy-int8' to baselines/wire/")  # fmt: skip
    with pytest.raises(ValueError, match=expected):
        get_codec("toy-int8")
    with pytest.raises(ValueError, match=expected):
        TrainConfig(wire="toy-int8")


def test_the_noise_floor_asks_the_format_whether_it_is_lossless(toy) -> None:  # type: ignore[no-untyped-def]
    def uplink(wire: str) -> DetailedMessage:
        return DetailedMessage(2, (1, 0, -1, 8), wire, ("layer.weight",))

    assert uplink_rounds([uplink("toy-copy")]) == ([[0]], {"layer.weight"})
    for wire in ("toy-fp16", "nf4", "int3"):
        with pytest.raises(InvalidSubmission, match=f"is in '{wire}': track 2's noise floor is "
                           "defined for fp32 uplink messages and other lossless"):  # fmt: skip
            uplink_rounds([uplink(wire)])


@pytest.fixture(scope="module")
def small_reference(tmp_path_factory, tiny_benchmark: Path) -> Path:  # type: ignore[no-untyped-def]
    """A random VT5 small enough for a round of training and a scoring pass in seconds."""
    from benchmark.data import load_split

    rows = load_split(tiny_benchmark, "train", client=0)
    return save_small_reference(rows, tmp_path_factory.mktemp("small-reference"), vocab_size=200,
                                max_answer_tokens=4)  # fmt: skip


@pytest.fixture(scope="module")
def run(toy_module, tmp_path_factory, tiny_benchmark: Path, small_reference: Path) -> Path:  # type: ignore[no-untyped-def]
    """``pflkit train --preset fedavg --wire toy-fp16``, one round."""
    out = tmp_path_factory.mktemp("toy-run") / "run"
    result = CliRunner().invoke(train, ["--data", str(tiny_benchmark), "--out", str(out),
                                        "--base", str(small_reference), "--wire", "toy-fp16",
                                        *TRAIN], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


# The binding runs before any database write; the worker's transitions on PostgreSQL are
# tested in test_worker.py.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_toy_format_run_is_bound_by_its_formula_and_one_byte_less_is_rejected(
    toy_module, run: Path, runner: JobRunner, teams: dict
) -> None:  # type: ignore[no-untyped-def]
    messages = [json.loads(line)
                for line in (run / "communication_log.jsonl").read_text().splitlines()]  # fmt: skip
    meta = json.loads((run / "submission.json").read_text())
    assert meta["wire_format"] == "toy-fp16"
    assert [m["format"] for m in messages] == ["toy-fp16"] * 2
    reference = runner.scorer.reference
    values = sum(math.prod(reference.spec[reference.file_names.get(name, name)][0])
                 for name in messages[0]["parameters"])  # fmt: skip
    assert [m["amount_of_bytes"] for m in messages] == [2 * values] * 2  # the format's formula
    assert outcome(runner, store_run(runner, teams["alpha"], run)) == ("finished", None)

    for message in messages:
        message["amount_of_bytes"] -= 1
    csv = "federated_round,sender,receiver,amount_of_bytes\n" + "".join(
        f"{m['federated_round']},{m['sender']},{m['receiver']},{m['amount_of_bytes']}\n"
        for m in messages
    )
    details = "".join(json.dumps(m) + "\n" for m in messages)
    meta["total_bytes"] = sum(m["amount_of_bytes"] for m in messages)
    status, reason = outcome(runner, store_run(runner, teams["alpha"], run, csv=csv,
                                               details=details, meta=meta))  # fmt: skip
    assert status == "rejected"
    assert reason == (
        f"communication_details: line 1 (round 1, server -> client {messages[0]['receiver']}) "
        f"claims {2 * values - 1:,} bytes, but its {len(messages[0]['parameters'])} tensors "
        f"({values:,} values) need at least {2 * values:,} bytes in toy-fp16"
    )
