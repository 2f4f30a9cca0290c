"""Privacy declaration: safe loading (the accountant's parser), and the cross-check against the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.validation import InvalidSubmission
from evaluator.validation.commlog import parse_log
from evaluator.validation.privacy import (
    cross_check,
    load_declaration,
    load_json_object,
    verify_declaration,
)
from tests.evaluator.factories import declaration, fedavg_log


def _file(tmp_path: Path, content: dict | str) -> Path:
    path = tmp_path / "privacy.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _tally(tmp_path: Path, rounds: int = 2, clients: tuple[int, ...] = (0, 1)):  # type: ignore[no-untyped-def]
    path = tmp_path / "log.csv"
    path.write_text(fedavg_log(rounds=rounds, clients=clients))
    return parse_log(path, clients=10, max_bytes=10**6, max_rows=1000)


def test_complete_declaration_loads(tmp_path: Path) -> None:
    assert load_declaration(_file(tmp_path, declaration()), max_bytes=4096).epsilon == 8.0


def test_missing_fields_are_named(tmp_path: Path) -> None:
    partial = declaration()
    del partial["noise_multiplier"]
    with pytest.raises(InvalidSubmission, match="privacy: noise_multiplier: missing"):
        load_declaration(_file(tmp_path, partial), max_bytes=4096)


@pytest.mark.parametrize(
    "content",
    [
        declaration(epsilon=-1),
        declaration(delta=1.5),
        declaration(sampling="uniform"),
        declaration(clients_per_round=11),
        '{"epsilon": 1, "epsilon": 8}',
        '{"epsilon": NaN}',
        "[1, 2]",
        "not json",
    ],
)
def test_invalid_declarations(tmp_path: Path, content: dict | str) -> None:
    with pytest.raises(InvalidSubmission, match="privacy:"):
        load_declaration(_file(tmp_path, content), max_bytes=4096)


def test_size_limit(tmp_path: Path) -> None:
    with pytest.raises(InvalidSubmission, match="exceed the limit"):
        load_declaration(_file(tmp_path, declaration()), max_bytes=10)


def test_json_object_loading(tmp_path: Path) -> None:
    path = _file(tmp_path, {"track": 1})
    assert load_json_object(path, part="metadata", max_bytes=4096) == {"track": 1}
    path.write_text("[" * 100_000)
    with pytest.raises(InvalidSubmission, match="not valid"):
        load_json_object(path, part="metadata", max_bytes=1_000_000)


def test_cross_check_against_log(tmp_path: Path) -> None:
    def parsed(**overrides: object):  # type: ignore[no-untyped-def]
        return load_declaration(_file(tmp_path, declaration(**overrides)), max_bytes=4096)

    tally = _tally(tmp_path)
    assert cross_check(parsed(), tally, clients=10) == []
    problems = cross_check(parsed(rounds=5, clients_per_round=3), tally, clients=10)
    assert "claims 5 rounds, the log holds 2" in problems[0]
    assert "2 clients in the log, 3 declared" in problems[1]
    assert "the benchmark has 4" in cross_check(parsed(), tally, clients=4)[0]
    assert cross_check(parsed(sampling="poisson", clients_per_round=3), tally, clients=10) == []


def test_verification_uses_the_accountant_and_the_log(tmp_path: Path) -> None:
    import accountant

    tally = _tally(tmp_path)
    # The published FL-GROUP-DP noise for epsilon 8 at 5 rounds gives 8.0039 (over budget).
    over = load_declaration(
        _file(tmp_path, declaration(rounds=2, sampling="poisson")), max_bytes=4096
    )
    verified, report = verify_declaration(over, tally, clients=10)
    assert verified is accountant.verify(over).passed
    assert report["accountant"]["declared_epsilon"] == 8.0 and report["log_mismatches"] == []
    lying_about_rounds = load_declaration(
        _file(tmp_path, declaration(rounds=1, sampling="poisson", epsilon=20.0)), max_bytes=4096
    )
    verified, report = verify_declaration(lying_about_rounds, tally, clients=10)
    assert verified is False and report["accountant"]["passed"] is True
    assert "claims 1 rounds, the log holds 2" in report["log_mismatches"][0]
