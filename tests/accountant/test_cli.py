"""The real `dp` command group: tables, --json, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pflkit.dp import dp

from .conftest import COMPETITION

FEDERATED = [
    "--clients-per-round",
    "2",
    "--clients",
    "10",
    "--providers-per-round",
    "50",
    "--min-providers",
    "400",
    "--rounds",
    "5",
]


def _write(tmp_path: Path, **change) -> Path:
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({**COMPETITION, **change}))
    return path


def test_epsilon_direct_json():
    result = CliRunner().invoke(
        dp,
        [
            "epsilon",
            "--noise-multiplier",
            "0.637",
            "--sample-rate",
            "0.025",
            "--steps",
            "5",
            "--delta",
            "1e-5",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert round(data["epsilon"]["rdp"], 4) == 3.9959
    assert data["epsilon"]["prv"] < data["epsilon"]["rdp"]


def test_epsilon_federated_table_and_strict():
    result = CliRunner().invoke(dp, ["epsilon", "--noise-multiplier", "1.145", *FEDERATED])
    assert result.exit_code == 0, result.output
    assert "1.0057" in result.output and "authoritative" in result.output
    strict = CliRunner().invoke(
        dp, ["epsilon", "--noise-multiplier", "1.145", *FEDERATED, "--analysis", "strict", "--json"]
    )
    data = json.loads(strict.output)
    assert data["sample_rate"] == 0.125 and data["analysis"] == "strict"


def test_noise_json_and_table():
    result = CliRunner().invoke(
        dp,
        [
            "noise",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            *FEDERATED,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["noise_multiplier"] == 1.1477 and data["rdp_epsilon"] <= 1
    table = CliRunner().invoke(
        dp, ["noise", "--epsilon", "8", "--sample-rate", "0.025", "--steps", "5"]
    )
    assert table.exit_code == 0 and "0.4681" in table.output


def test_bad_options_are_usage_errors():
    runner = CliRunner()
    cases = [
        (
            ["epsilon", "--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "5"],
            "sample_rate",
        ),
        (["epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "0"], "steps"),
        (
            ["epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "2249.5"],
            "not a valid integer",
        ),
        (
            [
                "epsilon",
                "--noise-multiplier",
                "1",
                "--sample-rate",
                "0.1",
                "--steps",
                "5",
                "--delta",
                "2",
            ],
            "delta",
        ),
        (["epsilon", "--noise-multiplier", "1", "--sample-rate", "0.1"], "--steps"),
        (
            [
                "epsilon",
                "--noise-multiplier",
                "1",
                "--sample-rate",
                "0.1",
                "--steps",
                "5",
                "--clients",
                "3",
            ],
            "not both",
        ),
        (["noise", "--epsilon", "0", "--sample-rate", "0.1", "--steps", "5"], "target_epsilon"),
        (["noise", "--epsilon", "1", *FEDERATED[:-2]], "--rounds"),
    ]
    for args, message in cases:
        result = runner.invoke(dp, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)


def test_verify_pass_and_fail_exit_codes(tmp_path):
    runner = CliRunner()
    passing = runner.invoke(
        dp, ["verify", str(_write(tmp_path, epsilon=4, noise_multiplier=0.637))]
    )
    assert passing.exit_code == 0, passing.output
    assert "PASS" in passing.output and "3.9959" in passing.output
    failing = runner.invoke(dp, ["verify", str(_write(tmp_path)), "--json"])
    assert failing.exit_code == 1
    data = json.loads(failing.output)
    assert data["passed"] is False and round(data["epsilon"]["rdp"], 4) == 1.0057


def test_verify_invalid_declaration_names_the_field(tmp_path):
    result = CliRunner().invoke(dp, ["verify", str(_write(tmp_path, sampling="uniform"))])
    assert result.exit_code == 2
    assert "sampling: must be one of 'poisson', 'fixed'" in result.output


def test_pflkit_entry_point_verify_fails_at_epsilon_8(tmp_path):
    path = _write(tmp_path, epsilon=8, noise_multiplier=0.468)
    completed = subprocess.run(
        [sys.executable, "-m", "pflkit.cli", "dp", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert completed.returncode == 1, completed.stderr
    assert "FAIL" in completed.stdout and "8.0039" in completed.stdout
