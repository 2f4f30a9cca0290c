"""bench.audit_ceiling: its ceilings are the audit's own bounds on a perfect attack, and it writes
the data files docs/results/audit_fdp.md renders."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from accountant.audit import one_run_audit, reconstruction_audit
from bench import audit_ceiling

ROOT = Path(__file__).resolve().parents[2]


def test_the_ceilings_are_the_audit_s_bounds_when_every_guess_is_right() -> None:
    m = 100
    included = np.arange(m) < m // 2
    scores = np.where(included, 2.0, 0.0) + np.linspace(0, 1, m)  # every "in" above every "out"
    audit = one_run_audit(scores, included, delta=audit_ceiling.DELTA)
    ceiling = audit_ceiling.ceilings(m)
    assert audit.epsilon_lower_bound == pytest.approx(ceiling["snj_plans"])
    assert audit.fdp_epsilon_lower_bound == pytest.approx(ceiling["fdp_plans"])

    k = audit_ceiling.CANDIDATES
    secrets = np.arange(m) % k
    candidates = np.zeros((m, k))
    candidates[np.arange(m), secrets] = 1.0 + np.linspace(0, 1, m)  # every guess right
    reconstruction = reconstruction_audit(candidates, secrets, delta=audit_ceiling.DELTA)
    assert reconstruction.fdp_epsilon_lower_bound == pytest.approx(
        audit_ceiling.ceilings(m, candidates=k)["fdp_plans"]
    )


def test_it_writes_the_tables_data_files(tmp_path: Path) -> None:
    recorded = tmp_path / "audits.jsonl"
    rows = [{"run": "liar", "claimed_epsilon": 1.0, "delta": 1e-5, "guesses": 25, "correct": 24,
             "audit_epsilon": 1.07},
            {"run": "plain", "claimed_epsilon": None, "delta": 1e-5, "guesses": 10, "correct": 5,
             "audit_epsilon": 0.0}]  # fmt: skip
    recorded.write_text("".join(json.dumps(row) + "\n" for row in rows))
    audit_ceiling.main(["--out", str(tmp_path), "--recorded", str(recorded)])

    spec = importlib.util.spec_from_file_location("tables", ROOT / "docs/hooks/results_tables.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    written = {}
    for name in (audit_ceiling.CEILING, audit_ceiling.GAUSSIAN, audit_ceiling.RECORDED):
        written[name] = hook.load(tmp_path / "data" / name)
        hook.render(written[name], name)  # every cell in its column's format
        assert "bench.audit_ceiling --out" in written[name]["command"]
    assert (tmp_path / "audit_ceiling.png").stat().st_size > 0

    ceiling = written[audit_ceiling.CEILING]
    assert "membership, 8 plans, each at 0.05 / 16" in ceiling["note"]
    assert [row["canaries"] for row in ceiling["rows"]] == [*audit_ceiling.CANARIES, 100]
    first = ceiling["rows"][0]
    assert first["snj_plans"] == round(audit_ceiling.ceilings(100)["snj_plans"], 3)
    assert ceiling["rows"][-1]["snj_plans"] == "n/a"

    liar, plain = written[audit_ceiling.RECORDED]["rows"]
    assert liar["guesses_right"] == "24 of 25" and plain["claim"] == "none"
    assert liar["fdp"] > liar["snj"] > 0 and plain["snj"] == plain["fdp"] == 0
    labels = [column["label"] for column in written[audit_ceiling.RECORDED]["columns"]]
    assert "SNJ, same counts at 0.05 / 16" in labels

    assert len(written[audit_ceiling.GAUSSIAN]["rows"]) == len(audit_ceiling.CLAIMS)


def test_the_recorded_audits_tables_are_at_the_audit_s_level() -> None:
    from bench.audit_relevel import relevel

    for name, bound in (("audit_mini.json", "question_bound"), ("audit_mini_c10.json", "bound"),
                        ("audit_mini_preset.json", "question_bound")):  # fmt: skip
        data = json.loads((ROOT / "docs/results/data" / name).read_text(encoding="utf-8"))
        assert relevel(data, bound) == data, name
    liar = {"columns": [{"key": "b", "label": "bound", "format": ".3f"}, {"key": "contradicted"}],
            "rows": [{"b": 0.0, "guesses_right": "24 of 25 (in)", "claim": 1,
                      "contradicted": "no"}]}  # fmt: skip
    row = relevel(liar, "b")["rows"][0]
    assert row["b"] == round(max(audit_ceiling.recorded_bounds(100, 25, 24)), 3) == 1.443
    assert row["contradicted"] == "**yes**"
