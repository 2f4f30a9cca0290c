"""privacy.json's one reader and writer: what the writer writes, the reader reads back; every
refusal, of the file or of a field, is one error type naming the field, and the evaluator and
``pflkit dp verify`` word the same refusal alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accountant.declaration import DeclarationError, parse_declaration
from baselines.privacy.declaration_file import load_declaration
from benchmark.privacy_file import PrivacyFileError, read_privacy_file, write_privacy_file
from evaluator.validation import InvalidSubmission
from evaluator.validation.privacy import load_declaration as evaluator_load
from tests.evaluator.factories import declaration


def test_what_the_writer_writes_the_reader_reads(tmp_path: Path) -> None:
    path = write_privacy_file(tmp_path / "run" / "privacy.json", declaration())
    assert path.read_text() == json.dumps(declaration(), indent=2, sort_keys=True) + "\n"
    assert read_privacy_file(path, validate=parse_declaration).to_dict() == {
        **declaration(), "epsilon": 8.0}  # fmt: skip
    assert [p.name for p in path.parent.iterdir()] == ["privacy.json"]  # no staging file left


@pytest.mark.parametrize(
    ("content", "field", "detail"),
    [('{"epsilon": 1, "epsilon": 8}', "epsilon", "appears twice in the file"),
     ("[1]", "", "the declaration must be a JSON object; got list"),
     (json.dumps({k: v for k, v in declaration().items() if k != "rounds"}), "rounds",
      "missing; privacy.json needs: ")],
)  # fmt: skip
def test_every_refusal_is_one_error_worded_alike_everywhere(
    tmp_path: Path, content: str, field: str, detail: str
) -> None:
    path = tmp_path / "privacy.json"
    path.write_text(content)
    with pytest.raises(PrivacyFileError) as refused:
        read_privacy_file(path, validate=parse_declaration)
    assert refused.value.field == field and refused.value.detail.startswith(detail)
    with pytest.raises(DeclarationError) as participant:
        load_declaration(path)
    with pytest.raises(InvalidSubmission) as upload:
        evaluator_load(path, max_bytes=4096)
    assert participant.value.field == field
    assert str(participant.value) == str(refused.value) == str(upload.value).split(": ", 1)[1]
