"""`pflkit data generate` and `pflkit data stats` through the click commands."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from benchmark.data.cli import data
from benchmark.data.synthetic.benchmark import plan_providers
from benchmark.data.synthetic.scales import SCALES


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_same_seed_same_bytes(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    result = CliRunner().invoke(
        data, ["generate", "--out", str(out), "--scale", "tiny", "--seed", "0", "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    first, second = _files(tiny_dir), _files(out)
    assert len(first) > 100 and first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []
    other = {p.company.name for p in plan_providers(SCALES["tiny"], 1)}
    assert other != {p.company.name for p in plan_providers(SCALES["tiny"], 0)}


def test_generate_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(data, ["generate", "--out", str(tmp_path), "--scale", "tiny"])
    assert result.exit_code != 0 and "--overwrite" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_stats_table_and_json(tiny_dir: Path) -> None:
    result = CliRunner().invoke(data, ["stats", str(tiny_dir), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [f"client_{k}" for k in range(10)] == [
        name for name in rows if name.startswith("client_")
    ]
    assert rows["client_0"]["providers"] == SCALES["tiny"].providers_per_client[0]
    assert rows["val"]["qa"] == rows["val_in"]["qa"] + rows["val_out"]["qa"]
    assert rows["test"]["qa"] == rows["test_in"]["qa"] + rows["test_out"]["qa"]
    assert rows["train_total"]["qa"] == sum(rows[f"client_{k}"]["qa"] for k in range(10))
    table = CliRunner().invoke(data, ["stats", str(tiny_dir)], terminal_width=120)
    assert table.exit_code == 0
    assert (
        "train client 9" in table.output
        and "test out" in table.output
        and "public train" in table.output
    )
    participant = CliRunner().invoke(data, ["stats", str(tiny_dir / "participant"), "--json"])
    assert "test" not in json.loads(participant.output)
