"""Property-based fuzzing of every parser of participant files (hypothesis).

The property: a parser either accepts its input or refuses it with ``InvalidSubmission`` (a 4xx
for the API); no other exception escapes. Over HTTP: every answer is 202 or a 4xx, never a 5xx,
and a refused upload leaves no row and no file behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import hypothesis
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from evaluator.validation import InvalidSubmission
from evaluator.validation.commdetails import read_details
from evaluator.validation.commlog import parse_log
from evaluator.validation.jsonfile import parse_json_object
from evaluator.validation.privacy import load_declaration
from tests.evaluator.factories import LOG_HEADER, declaration, details_log, metadata

# Cells that look like numbers to a human or to int(): ASCII, signs, Unicode digits, exponents.
_CELLS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(
        [
            "--5",
            "+5",
            "\u00b2",
            "\u0665\u0660",
            "\uff15",
            "1e3",
            "5.0",
            "",
            " 7 ",
            "0x10",
            "9" * 30,
            "-0",
            "\u0663",
        ]
    ),  # fmt: skip
    st.text(max_size=12),
)
_LOG_LINES = st.lists(
    st.lists(_CELLS, min_size=0, max_size=6).map(",".join), min_size=0, max_size=20
)
_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
_NUMBER_LITERALS = st.one_of(
    st.integers(min_value=1, max_value=6000).map(lambda n: "7" * n),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "1.5", "0", "-3", "1" + "0" * 320]),
)
# Raw text that is JSON-like: objects with hostile numbers, nesting, repeated keys.
_JSON_TEXTS = st.one_of(
    _JSON_VALUES.map(json.dumps),
    st.builds(lambda key, lit: f'{{"{key}": {lit}}}', st.text(max_size=6), _NUMBER_LITERALS),
    st.integers(min_value=1, max_value=800).map(lambda n: '{"x": ' + "[" * n + "]" * n + "}"),
    st.integers(min_value=1, max_value=800).map(lambda n: "[" * n),
    st.builds(lambda k: f'{{"{k}": 1, "{k}": 2}}', st.text(max_size=6)),
    st.text(max_size=60),
)


@hypothesis.settings(max_examples=300, deadline=None)
@given(lines=_LOG_LINES, header=st.booleans())
def test_log_parser_accepts_or_refuses(tmp_path_factory, lines: list[str], header: bool) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("log") / "log.csv"
    path.write_text("\n".join(([LOG_HEADER] if header else []) + lines), encoding="utf-8")
    try:
        tally = parse_log(path, clients=10, max_bytes=10**6, max_rows=1000, max_rounds=5,
                          max_messages_per_round=40)  # fmt: skip
    except InvalidSubmission as exc:
        assert exc.part == "communication_log"
        return
    assert tally.total_bytes > 0 and 1 <= len(tally.rounds) <= 5
    for cell_line in lines:
        for cell in cell_line.split(","):
            assert cell.strip().isascii() or not cell.strip()


_DETAIL_LINES = st.lists(
    st.one_of(
        _JSON_TEXTS,
        st.fixed_dictionaries(
            {"federated_round": st.sampled_from([0, 1, -1, True, "0", 1.0]),
             "sender": st.sampled_from([-1, 0, 10]), "receiver": st.sampled_from([-1, 0]),
             "amount_of_bytes": st.integers(min_value=-1, max_value=2**70),
             "format": st.one_of(st.sampled_from(["fp32", "nf4"]), st.text(max_size=50)),
             "parameters": st.one_of(st.lists(st.text(max_size=320), max_size=5),
                                     _JSON_SCALARS)},  # fmt: skip
        ).map(json.dumps),
    ),
    max_size=6,
)


@hypothesis.settings(max_examples=300, deadline=None)
@given(lines=_DETAIL_LINES)
def test_detailed_log_reader_accepts_or_refuses(tmp_path_factory, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("details") / "communication_log.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    rows = [(0, -1, 0, 5), (0, 0, -1, 5)]
    try:
        messages = read_details(path, rows, max_bytes=10**6, max_parameters=4)
    except InvalidSubmission as exc:
        assert exc.part == "communication_details"
        return
    assert [m.row for m in messages] == rows
    assert all(isinstance(n, str) for m in messages for n in m.parameters)


@hypothesis.settings(max_examples=300, deadline=None)
@given(text=_JSON_TEXTS)
def test_json_parser_accepts_or_refuses(text: str) -> None:
    try:
        value = parse_json_object(text.encode("utf-8"), part="metadata")
    except InvalidSubmission as exc:
        assert exc.part == "metadata"
        return
    assert isinstance(value, dict)
    json.dumps(value)  # whatever is accepted can be stored in a JSON column


@hypothesis.settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(sorted(declaration())),
    value=st.one_of(
        _JSON_VALUES, _NUMBER_LITERALS.map(lambda s: json.loads(s) if len(s) < 300 else s)
    ),
)
def test_declaration_loader_accepts_or_refuses(tmp_path_factory, key: str, value: object) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("privacy") / "privacy.json"
    text = json.dumps(declaration()).replace(f'"{key}": ', f'"{key}": {_literal(value)}, "_": ', 1)
    path.write_text(text)
    try:
        load_declaration(path, max_bytes=64 * 1024)
    except InvalidSubmission as exc:
        assert exc.part == "privacy"


def _literal(value: object) -> str:
    """A JSON literal: strings that hold a long number literal are written bare."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return value
    return json.dumps(value)


def _stored(settings_) -> tuple[int, list[str], list[str]]:  # type: ignore[no-untyped-def]
    from tests.evaluator.test_api import count_rows

    root = Path(settings_.storage_dir)
    return (
        count_rows(settings_),
        sorted(p.name for p in (root / "incoming").iterdir()),
        sorted(p.name for p in (root / "submissions").iterdir()),
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_uploads_are_4xx_or_accepted_never_5xx(settings, teams: dict, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.evaluator.conftest import LiveServer
    from tests.evaluator.factories import fedavg_log, small_safetensors

    roomy = settings.model_copy(update={"daily_quota": 10_000})
    auth = {"Authorization": f"Bearer {teams['alpha']}"}
    with LiveServer(roomy) as server, httpx.Client(headers=auth, timeout=60) as client:

        @hypothesis.settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
        @given(
            log=st.one_of(
                st.just(fedavg_log()), _LOG_LINES.map(lambda ls: "\n".join([LOG_HEADER, *ls]))
            ),
            meta=st.one_of(st.just(json.dumps(metadata())), _JSON_TEXTS),
            privacy=st.one_of(st.none(), _JSON_TEXTS, st.just(json.dumps(declaration()))),
            boundary=st.one_of(st.none(), st.text("abcXYZ09-_", min_size=1, max_size=300)),
            truncate=st.integers(min_value=0, max_value=40),
            variant=st.integers(min_value=0, max_value=10**6),
        )
        def upload(log: str, meta: str, privacy: str | None, boundary: str | None,
                   truncate: int, variant: int) -> None:  # fmt: skip
            model = small_safetensors(tmp_path / "m.safetensors", variant=variant).read_bytes()
            files = {
                "model": ("model.safetensors", model),
                "communication_log": ("communication_log.csv", log.encode("utf-8")),
                "communication_details": ("communication_log.jsonl",
                                          details_log(log).encode("utf-8")),
                "metadata": ("submission.json", meta.encode("utf-8")),
            }
            if privacy is not None:
                files["privacy"] = ("privacy.json", privacy.encode("utf-8"))
            request = client.build_request("POST", server.url + "/api/v1/submissions", files=files)
            body = request.read()
            headers = dict(request.headers)
            if boundary is not None:
                old = headers["content-type"].split("boundary=", 1)[1]
                body = body.replace(old.encode(), boundary.encode())
                headers["content-type"] = f"multipart/form-data; boundary={boundary}"
            if truncate:
                body = body[: len(body) - truncate]
            headers.pop("content-length", None)
            before = _stored(roomy)
            response = client.post(server.url + "/api/v1/submissions", content=body,
                                   headers=headers)  # fmt: skip
            assert response.status_code < 500, response.text
            if response.status_code != 202:
                assert 400 <= response.status_code < 500
                assert _stored(roomy) == before
                assert response.json()["detail"]

        upload()
