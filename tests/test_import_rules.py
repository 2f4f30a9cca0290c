"""The import rules of docs/design.md hold: `lint-imports` keeps every contract.

The contracts are `[tool.importlinter]` in pyproject.toml: benchmark and accountant import
nothing else of the kit, baselines never imports the service, the evaluator never imports the
baselines or the leaderboard, the leaderboard reads the evaluator, no product package
imports the research scripts (`experiments`) or the measurements (`bench`), `baselines` is
layered (cli over the engine over its components over `baselines.core`), and `baselines.core`
imports nothing else of `baselines`.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
