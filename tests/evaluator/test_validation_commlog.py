"""Communication log: parsing limits, validation rules and the byte tally."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.validation import InvalidSubmission
from evaluator.validation.commlog import parse_log
from tests.evaluator.factories import LOG_HEADER, fedavg_log

LIMITS = {"clients": 10, "max_bytes": 64 * 1024, "max_rows": 1000}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "communication_log.csv"
    path.write_text(text)
    return path


def test_tally_up_down_and_per_round(tmp_path: Path) -> None:
    tally = parse_log(
        _write(tmp_path, fedavg_log(rounds=3, clients=(0, 7), nbytes=1000)),
        clients_per_round=2,
        rounds=3,
        **LIMITS,
    )
    assert tally.bytes_down == 3 * 2 * 1000
    assert tally.bytes_up == 3 * 2 * 500
    assert tally.total_bytes == 9000
    assert tally.messages == 12
    assert tally.per_round()[1] == {
        "round": 1,
        "up": 1000,
        "down": 2000,
        "total": 3000,
        "clients": 2,
        "messages": 4,
    }


def test_header_with_bom_and_spaces_is_accepted(tmp_path: Path) -> None:
    text = "\ufefffederated_round, sender, receiver, amount_of_bytes\n0,-1,0,5\n0,0,-1,5\n"
    assert parse_log(_write(tmp_path, text), **LIMITS).total_bytes == 10


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,-1,0,-5", "amount_of_bytes must be positive"),
        ("0,-1,0,0", "amount_of_bytes must be positive"),
        ("0,-1,10,5", "receiver 10 is not the server"),
        ("0,-2,0,5", "sender -2 is not the server"),
        ("0,0,1,5", "between the server"),
        ("0,-1,-1,5", "between the server"),
        ("-1,-1,0,5", "federated_round -1 is negative"),
        ("1,-1,0,5\n0,-1,0,5", "rounds must be in order"),
        ("0,-1,0,5.5", "must be an integer"),
        ("0,-1,0,1e3", "must be an integer"),
        ("0,-1,0", "3 fields"),
        ("0,-1,0,5,9", "5 fields"),
    ],
)
def test_invalid_rows(tmp_path: Path, rows: str, message: str) -> None:
    with pytest.raises(InvalidSubmission, match=message):
        parse_log(_write(tmp_path, f"{LOG_HEADER}\n{rows}\n"), **LIMITS)


def test_bad_header_empty_and_binary(tmp_path: Path) -> None:
    with pytest.raises(InvalidSubmission, match="first line must be"):
        parse_log(_write(tmp_path, "round,from,to,bytes\n0,-1,0,5\n"), **LIMITS)
    with pytest.raises(InvalidSubmission, match="empty"):
        parse_log(_write(tmp_path, ""), **LIMITS)
    with pytest.raises(InvalidSubmission, match="no messages"):
        parse_log(_write(tmp_path, LOG_HEADER + "\n"), **LIMITS)
    path = tmp_path / "binary.csv"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidSubmission, match="not UTF-8"):
        parse_log(path, **LIMITS)


def test_limits(tmp_path: Path) -> None:
    path = _write(tmp_path, fedavg_log(rounds=100, clients=(0, 1)))
    with pytest.raises(InvalidSubmission, match="rows exceed the limit"):
        parse_log(path, clients=10, max_bytes=64 * 1024, max_rows=50)
    with pytest.raises(InvalidSubmission, match="bytes exceed the limit"):
        parse_log(path, clients=10, max_bytes=100, max_rows=1000)
    long_line = f"{LOG_HEADER}\n0,-1,0,{'1' * 300}\n"
    with pytest.raises(InvalidSubmission, match="longer than"):
        parse_log(_write(tmp_path, long_line), **LIMITS)


def test_consistency_with_metadata(tmp_path: Path) -> None:
    path = _write(tmp_path, fedavg_log(rounds=2, clients=(0, 1)))
    with pytest.raises(InvalidSubmission, match="2 clients took part but 3 per round"):
        parse_log(path, clients_per_round=3, **LIMITS)
    with pytest.raises(InvalidSubmission, match="holds 2 rounds but the metadata declares 5"):
        parse_log(path, rounds=5, **LIMITS)
    assert parse_log(path, clients_per_round=3, sampling="poisson", **LIMITS).total_bytes > 0
    with pytest.raises(InvalidSubmission, match="more than the declared 1"):
        parse_log(path, clients_per_round=1, sampling="poisson", **LIMITS)


def _fedavg_ft_log(*, rounds: int = 2, clients: int = 10) -> str:
    """fedavg-ft's log: 2 clients per round in rounds 1..R, then round R+1 sends the final
    model down to every client (personalisation), nothing comes back."""
    lines = fedavg_log(rounds=rounds, clients=(0, 1)).splitlines()
    body = [",".join([str(int(r) + 1), *rest]) for r, *rest in
            (line.split(",") for line in lines[1:])]  # fmt: skip
    final = [f"{rounds + 1},-1,{k},1000" for k in range(clients)]
    return "\n".join([LOG_HEADER, *body, *final]) + "\n"


def test_the_personalisation_round_is_last_and_exempt_from_the_declared_shape(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, _fedavg_ft_log())
    shape = {"clients_per_round": 2, "rounds": 2}
    tally = parse_log(path, personal_round=3, **shape, **LIMITS)
    assert [r["round"] for r in tally.per_round()] == [1, 2, 3]
    assert tally.per_round()[-1]["clients"] == 10 and tally.bytes_down == 2 * 2 * 1000 + 10_000
    # without the declaration, the personalisation round breaks the declared shape
    with pytest.raises(InvalidSubmission, match="holds 3 rounds but the metadata declares 2"):
        parse_log(path, **shape, **LIMITS)
    with pytest.raises(InvalidSubmission, match="personal.log_round 2 .* last round is 3"):
        parse_log(path, personal_round=2, **shape, **LIMITS)


def test_an_empty_log_only_where_allowed(tmp_path: Path) -> None:
    path = _write(tmp_path, LOG_HEADER + "\n")
    with pytest.raises(InvalidSubmission, match="header but no messages"):
        parse_log(path, rounds=0, **LIMITS)
    tally = parse_log(path, rounds=0, allow_empty=True, **LIMITS)
    assert tally.total_bytes == 0 and tally.rounds == []
    with pytest.raises(InvalidSubmission, match="personal.log_round 1 .* last round is none"):
        parse_log(path, personal_round=1, allow_empty=True, **LIMITS)


def test_pretraining_rounds_come_first_count_in_the_total_and_keep_their_shape(
    tmp_path: Path,
) -> None:
    pre = [f"1,-1,{k},1200\n1,{k},-1,1200" for k in (3, 4, 5)]  # 3 clients, bigger messages
    fine = [f"{r},-1,{k},1000\n{r},{k},-1,1000" for r in (2, 3) for k in (0, 7)]
    final = [f"4,-1,{k},1000" for k in range(10)]  # track 3's personalisation round
    path = _write(tmp_path, "\n".join([LOG_HEADER, *pre, *fine, *final]) + "\n")
    shape = {"clients_per_round": 2, "rounds": 2, "personal_round": 4}
    tally = parse_log(path, pretraining_rounds=1, pretraining_clients_per_round=3, **shape,
                      **LIMITS)
    assert [r["round"] for r in tally.per_round()] == [1, 2, 3, 4]
    assert tally.total_bytes == 6 * 1200 + 8 * 1000 + 10 * 1000
    with pytest.raises(InvalidSubmission, match="holds 3 rounds but the metadata declares 2"):
        parse_log(path, **shape, **LIMITS)
    with pytest.raises(InvalidSubmission, match="pre-training round 1: 3 clients .* 2 per"):
        parse_log(path, pretraining_rounds=1, pretraining_clients_per_round=2, **shape, **LIMITS)
    with pytest.raises(InvalidSubmission, match="round 2: 2 clients took part but 3 per round"):
        parse_log(path, pretraining_rounds=1, pretraining_clients_per_round=3,
                  **{**shape, "clients_per_round": 3}, **LIMITS)
    with pytest.raises(InvalidSubmission, match="declares 3 pre-training rounds .* 3 rounds"):
        parse_log(path, pretraining_rounds=3, pretraining_clients_per_round=3, **shape, **LIMITS)
