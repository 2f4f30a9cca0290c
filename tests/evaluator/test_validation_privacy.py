"""Privacy declaration: safe loading (the accountant's parser), and the cross-check against the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluator.federation import Federation, federation_of
from evaluator.validation import InvalidSubmission
from evaluator.validation.commlog import parse_log
from evaluator.validation.privacy import (
    cross_check,
    load_declaration,
    load_json_object,
    verify_declaration,
)
from tests.evaluator.factories import declaration, fedavg_log, write_data_points

# The federation of factories.declaration(): 10 clients, the smallest with 400 providers.
FEDERATION = Federation(clients=10, min_providers=400, providers=4045)


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
    assert cross_check(parsed(), tally, federation=FEDERATION) == []
    problems = cross_check(parsed(rounds=5, clients_per_round=3), tally, federation=FEDERATION)
    assert "claims 5 rounds, the log holds 2" in problems[0]
    assert "2 clients in the log, 3 declared" in problems[1]
    four = Federation(clients=4, min_providers=400, providers=1600)
    assert "the benchmark has 4" in cross_check(parsed(), tally, federation=four)[0]
    assert (
        cross_check(parsed(sampling="poisson", clients_per_round=3), tally, federation=FEDERATION)
        == []
    )


def test_verification_uses_the_accountant_and_the_log(tmp_path: Path) -> None:
    import accountant

    tally = _tally(tmp_path)
    # The published FL-GROUP-DP noise for epsilon 8 at 5 rounds gives 8.0039 (over budget).
    over = load_declaration(
        _file(tmp_path, declaration(rounds=2, sampling="poisson")), max_bytes=4096
    )
    verified, report = verify_declaration(over, tally, federation=FEDERATION)
    assert verified is accountant.verify(over).passed
    assert report["accountant"]["declared_epsilon"] == 8.0 and report["log_mismatches"] == []
    lying_about_rounds = load_declaration(
        _file(tmp_path, declaration(rounds=1, sampling="poisson", epsilon=20.0)), max_bytes=4096
    )
    verified, report = verify_declaration(lying_about_rounds, tally, federation=FEDERATION)
    assert verified is False and report["accountant"]["passed"] is True
    assert "claims 1 rounds, the log holds 2" in report["log_mismatches"][0]


def _verify(
    tmp_path: Path, log_rounds: int = 2, log_clients: tuple[int, ...] = (0, 1), **overrides
):  # type: ignore[no-untyped-def]
    claim = load_declaration(_file(tmp_path, declaration(**overrides)), max_bytes=4096)
    return verify_declaration(
        claim, _tally(tmp_path, log_rounds, log_clients), federation=FEDERATION
    )


def test_federation_facts_come_from_the_benchmark(tmp_path: Path) -> None:
    write_data_points(tmp_path, clients=10, min_providers=400)
    assert federation_of(tmp_path) == Federation(clients=10, min_providers=400, providers=4045)
    assert federation_of(None).min_providers is None
    honest = dict(sampling="poisson", epsilon=20.0, noise_multiplier=1.0)
    verified, report = _verify(tmp_path, **honest)
    assert verified is True and report["federation"]["min_providers"] == 400
    assert "benchmark the evaluator holds" in report["covers"]
    assert "trained by the declared mechanism" in report["does_not_cover"]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (
            {"min_providers": 1_000_000},
            "min_providers 1000000, the benchmark's smallest client holds 400",
        ),
        ({"clients": 1_000, "clients_per_round": 2}, "claims 1000 clients, the benchmark has 10"),
        ({"delta": 0.1}, "delta 0.1 is above 1/N"),
        ({"providers_per_round": 500, "min_providers": 500}, "exceeds the 400 providers"),
    ],
    ids=["min_providers 1e6", "clients", "delta above 1/N", "providers per round"],
)
def test_spoofed_federation_figures_are_not_verified(
    tmp_path: Path, overrides: dict, words: str
) -> None:
    verified, report = _verify(
        tmp_path, sampling="poisson", epsilon=20.0, noise_multiplier=1.0, **overrides
    )
    assert verified is False
    assert any(words in problem for problem in report["log_mismatches"]), report["log_mismatches"]


def test_min_providers_spoof_does_not_lower_epsilon(tmp_path: Path) -> None:
    import accountant

    # Noise that is private enough only if each client held a million providers.
    claim = dict(sampling="poisson", epsilon=1.0, noise_multiplier=0.7, min_providers=1_000_000)
    assert accountant.verify(accountant.parse_declaration(declaration(**claim))).passed is True
    verified, report = _verify(tmp_path, **claim)
    assert verified is False and report["accountant"]["passed"] is False


def test_clients_per_round_below_the_log_is_caught(tmp_path: Path) -> None:
    fixed = dict(sampling="fixed", clients_per_round=1)
    verified, report = _verify(tmp_path, **fixed)
    assert verified is False and "2 clients in the log, 1 declared" in report["log_mismatches"][0]
    # Poisson: the accountant uses the log's 2 per round, not the declared 1, so the claim
    # sized for 1 client per round fails; 20 rounds of 3 clients also disagree with the log.
    poisson = dict(sampling="poisson", clients_per_round=1, epsilon=1.2, noise_multiplier=1.0)
    import accountant

    assert accountant.verify(accountant.parse_declaration(declaration(**poisson))).passed is True
    verified, report = _verify(tmp_path, **poisson)
    assert verified is False and report["accountant"]["declaration"]["clients_per_round"] == 2
    verified, report = _verify(
        tmp_path, log_rounds=20, log_clients=(0, 1, 2), **{**poisson, "rounds": 20}
    )
    assert verified is False
    assert "3.00 clients per round on average" in report["log_mismatches"][0]
