"""The one strict, bounded reader of untrusted JSON: every limit refuses with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.strict_json import (
    DEFAULT_LIMITS,
    JsonLimits,
    JsonRefused,
    Reason,
    parse_json_object,
    read_json_object,
)


def _refusal(raw: bytes, limits: JsonLimits = DEFAULT_LIMITS) -> JsonRefused:
    with pytest.raises(JsonRefused) as caught:
        parse_json_object(raw, limits=limits)
    return caught.value


def test_a_plain_object_is_read_with_its_numbers_typed() -> None:
    raw = b'{"epsilon": 8, "delta": 1e-05, "name": "run", "tags": ["a", {"b": null}]}'
    data = parse_json_object(raw)
    assert data == {"epsilon": 8, "delta": 1e-05, "name": "run", "tags": ["a", {"b": None}]}
    assert isinstance(data["epsilon"], int) and isinstance(data["delta"], float)


def test_a_byte_order_mark_is_allowed() -> None:
    assert parse_json_object(b"\xef\xbb\xbf" + b'{"a": 1}') == {"a": 1}


def test_non_utf8_bytes_are_refused_as_malformed() -> None:
    refusal = _refusal(b'\xff\xfe{"a": 1}')
    assert refusal.reason is Reason.NOT_UTF8 and refusal.malformed
    assert "not valid UTF-8 JSON" in str(refusal)


@pytest.mark.parametrize("raw", [b"{not json", b'{"a": 1,}', b"", b'{"a": 1} trailing'])
def test_syntax_errors_are_malformed_and_carry_the_parser_detail(raw: bytes) -> None:
    refusal = _refusal(raw)
    assert refusal.reason is Reason.MALFORMED and refusal.malformed
    assert str(refusal).startswith("not valid UTF-8 JSON") and refusal.subject


def test_unbalanced_brackets_are_malformed() -> None:
    refusal = _refusal(b'{"a": [1, 2]')
    assert refusal.reason is Reason.MALFORMED
    assert str(refusal) == "not valid UTF-8 JSON: its brackets do not balance"


def test_brackets_inside_strings_do_not_count_towards_depth() -> None:
    assert parse_json_object(b'{"a": "[[[[{{{{\\"]]]]"}')["a"] == '[[[[{{{{"]]]]'


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    limits = JsonLimits(max_depth=3)
    assert parse_json_object(b'{"a": {"b": [1]}}', limits=limits)
    refusal = _refusal(b'{"a": {"b": [[1]]}}', limits)
    assert refusal.reason is Reason.TOO_DEEP and not refusal.malformed
    assert str(refusal) == "nested 4 levels deep; at most 3 levels are accepted"


def test_deep_nesting_is_refused_before_the_parser_recurses() -> None:
    refusal = _refusal(b"[" * 100_000 + b"]" * 100_000)
    assert refusal.reason is Reason.TOO_DEEP
    assert "at most 16 levels" in str(refusal)


def test_a_number_longer_than_the_limit_is_refused() -> None:
    limits = JsonLimits(max_number_chars=5)
    assert parse_json_object(b'{"a": 12345, "b": -1.25}', limits=limits)
    refusal = _refusal(b'{"a": 123456}', limits)
    assert refusal.reason is Reason.NUMBER_TOO_LONG and refusal.subject == "123456"
    assert "a number of 6 characters" in str(refusal)
    assert "numbers may have at most 5 characters" in str(refusal)


def test_an_integer_beyond_python_digit_limit_is_refused_by_length() -> None:
    refusal = _refusal(b'{"a": ' + b"1" * 5000 + b"}")
    assert refusal.reason is Reason.NUMBER_TOO_LONG
    assert "a number of 5000 characters" in str(refusal)


def test_a_float_beyond_the_float_range_is_refused() -> None:
    refusal = _refusal(b'{"a": 1e400}')
    assert refusal.reason is Reason.NUMBER_OVERFLOW
    assert "too large for a float" in str(refusal)


def test_more_keys_than_the_limit_are_refused_across_the_whole_document() -> None:
    limits = JsonLimits(max_keys=3)
    assert parse_json_object(b'{"a": {"b": 1}, "c": 2}', limits=limits)
    refusal = _refusal(b'{"a": {"b": 1, "c": 2}, "d": 3}', limits)
    assert refusal.reason is Reason.TOO_MANY_KEYS
    assert str(refusal) == "more than 3 keys in the file"


def test_a_duplicate_key_is_refused_and_named() -> None:
    refusal = _refusal(b'{"epsilon": 1, "epsilon": 8}')
    assert refusal.reason is Reason.DUPLICATE_KEY and refusal.subject == "epsilon"
    assert str(refusal) == "key 'epsilon' appears twice; give each key once"


def test_a_duplicate_key_in_a_nested_object_is_refused() -> None:
    assert _refusal(b'{"a": {"b": 1, "b": 2}}').subject == "b"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant: str) -> None:
    refusal = _refusal(b'{"epsilon": ' + constant.encode() + b"}")
    assert refusal.reason is Reason.NOT_A_NUMBER and refusal.subject == constant
    assert str(refusal) == f"{constant} is not a JSON number; write a finite number"


@pytest.mark.parametrize(("raw", "found"), [(b"[1, 2]", "list"), (b'"text"', "str"), (b"3", "int")])
def test_anything_but_an_object_is_refused(raw: bytes, found: str) -> None:
    refusal = _refusal(raw)
    assert refusal.reason is Reason.NOT_AN_OBJECT and refusal.subject == found
    assert str(refusal) == "must be a JSON object" and not refusal.malformed


def test_a_file_within_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    path.write_text(json.dumps({"track": 1}), encoding="utf-8")
    assert read_json_object(path, max_bytes=path.stat().st_size) == {"track": 1}


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    path.write_text(json.dumps({"padding": "x" * 200}), encoding="utf-8")
    with pytest.raises(JsonRefused) as caught:
        read_json_object(path, max_bytes=100)
    assert caught.value.reason is Reason.TOO_LARGE
    assert str(caught.value) == f"{path.stat().st_size} bytes exceed the limit of 100"


def test_a_file_is_held_to_the_limits_given(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a": {"b": 1}}')
    with pytest.raises(JsonRefused, match="nested 2 levels deep"):
        read_json_object(path, max_bytes=1024, limits=JsonLimits(max_depth=1))
