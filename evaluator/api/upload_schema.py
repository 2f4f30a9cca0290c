"""The OpenAPI description of an upload's multipart body, from the submission contract
(``benchmark.submission_contract.PARTS``) and the tracks that need each part."""

from __future__ import annotations

from typing import Any

from benchmark.submission_contract import PARTS, Part
from benchmark.tracks import common_parts, tracks_needing

#: what the schema adds to a part's own description.
NOTES = {
    "model": "the full VT5 state dict",
    "communication_details": "per message, the tensors it carried and their wire format",
    "metadata": "track, method, description",
    "recipe": "optional, any track: how the run was trained, for the organisers' re-run; "
    "never shown",
}


def _description(part: Part) -> str:
    """``privacy.json: a privacy declaration (track 2)``: the file, what it is, who needs it."""
    needed = tracks_needing(part.name)
    who = "" if part.name in common_parts() or not needed else (
        f" (track {' or '.join(map(str, needed))})")  # fmt: skip
    note = f"; {NOTES[part.name]}" if part.name in NOTES else ""
    if part.per_client:
        return (f"{part.name}_{{k}}: client k's file of {part.description}{who}, one field per "
                "client 0..K-1")  # fmt: skip
    return f"{part.run_path.rsplit('/', 1)[-1]}: {part.description}{who}{note}"


def upload_body() -> dict[str, Any]:
    """The ``openapi_extra`` of the upload route: a multipart object with a binary field per
    part (``{name}_{k}`` fields for a per-client part), the common parts required."""
    binary = {"type": "string", "format": "binary"}
    schema = {
        "type": "object",
        "required": list(common_parts()),
        "properties": {name: {**binary, "description": _description(part)}
                       for name, part in PARTS.items() if not part.per_client},
        "patternProperties": {f"^{name}_[0-9]+$": {**binary, "description": _description(part)}
                              for name, part in PARTS.items() if part.per_client},
    }  # fmt: skip
    return {"requestBody": {"required": True,
                            "content": {"multipart/form-data": {"schema": schema}}}}  # fmt: skip
