"""privacy.json parsing and validation: every bad field is an error that names it."""

from __future__ import annotations

import json

import pytest

from accountant.declaration import DeclarationError, parse_declaration
from baselines.privacy.declaration_file import load_declaration, parse_declaration_bytes

from .conftest import COMPETITION


def test_valid_declaration_round_trips(tmp_path):
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps(COMPETITION))
    declaration = load_declaration(path)
    assert declaration.to_dict() == {**COMPETITION, "epsilon": 1.0}
    assert declaration.rounds == 5 and isinstance(declaration.rounds, int)


@pytest.mark.parametrize("field", list(COMPETITION))
def test_missing_field(field):
    data = {k: v for k, v in COMPETITION.items() if k != field}
    with pytest.raises(DeclarationError, match=f"^{field}: missing") as caught:
        parse_declaration(data)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("epsilon", 0, "must be > 0"),
        ("epsilon", -1, "must be > 0"),
        ("epsilon", "1", "must be a number"),
        ("epsilon", True, "must be a number"),
        ("delta", 0, r"\(0, 1\)"),
        ("delta", 1, r"\(0, 1\)"),
        ("delta", 1.5, r"\(0, 1\)"),
        ("noise_multiplier", 0, "must be > 0"),
        ("clipping_norm", -0.5, "must be > 0"),
        ("rounds", 0, "must be >= 1"),
        ("rounds", 10**9, "not supported"),
        ("clients", 0, "must be >= 1"),
        ("clients", 10.5, "whole number"),
        ("clients_per_round", 11, "exceeds clients"),
        ("providers_per_round", 401, "exceeds min_providers"),
        ("min_providers", 0, "must be >= 1"),
        ("sampling", "uniform", "must be one of 'poisson', 'fixed'"),
        ("sampling", "Poisson", "must be one of"),
        ("analysis", "lenient", "must be one of 'competition', 'strict'"),
        ("unit", "document", "must be one of 'provider'"),
        ("unit", ["provider"], "must be one of"),
    ],
)
def test_invalid_field(field, value, message):
    with pytest.raises(DeclarationError, match=message) as caught:
        parse_declaration({**COMPETITION, field: value})
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_non_integer_rounds_are_kept_for_the_report():
    assert parse_declaration({**COMPETITION, "rounds": 5.5}).rounds == 5.5
    assert parse_declaration({**COMPETITION, "rounds": 5.0}).rounds == 5


def test_unknown_fields_are_listed_not_fatal():
    declaration = parse_declaration({**COMPETITION, "method": "dp-fedavg"})
    assert declaration.unknown_fields == ("method",)


def test_oversized_file_is_refused(tmp_path):
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({**COMPETITION, "padding": "x" * 100_000}))
    with pytest.raises(DeclarationError, match="larger than"):
        load_declaration(path)
    with pytest.raises(DeclarationError, match="larger than 100 bytes"):
        load_declaration(path, max_bytes=100)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"epsilon": NaN}', "NaN is not a valid JSON number"),
        (b'{"epsilon": Infinity}', "Infinity"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    ],
)
def test_malformed_files(raw, message):
    with pytest.raises(DeclarationError, match=message):
        parse_declaration_bytes(raw)


def test_duplicate_keys_are_refused():
    raw = json.dumps(COMPETITION)[:-1] + ', "epsilon": 8}'
    with pytest.raises(DeclarationError, match="epsilon: appears twice"):
        parse_declaration_bytes(raw.encode())


def test_missing_file(tmp_path):
    with pytest.raises(DeclarationError, match="cannot read"):
        load_declaration(tmp_path / "absent.json")
