"""Track-3 personalisations of an upload: the ``personal/`` directory checked against the
benchmark's clients and the checkpoint's tensors, and the tensors a method declared frozen.

The checks are :func:`benchmark.model.personalisation.read_personalisations` (exactly K files
``client_{k}.safetensors``, names, shapes and dtypes of the checkpoint, never unpickled, NaN and
infinity refused, per-file and total size limits); K is the benchmark's, never the
participant's. Messages name the file relative to the submission (``personal/client_3...``),
never a path of the service.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.model.personalisation import (
    PersonalisationError,
    Personalisations,
    read_personalisations,
)
from benchmark.model.safetensors_header import TensorSpec
from benchmark.submission_contract import PERSONAL_DIR
from evaluator.validation.errors import InvalidSubmission

PART = "personal"


def check_personalisations(
    directory: Path,
    spec: TensorSpec,
    clients: int,
    *,
    max_file_bytes: int,
    max_total_bytes: int,
    check_values: bool = True,
) -> Personalisations:
    """Check a stored submission's ``personal/`` directory.

    Args:
        directory: the ``personal/`` directory of the submission.
        spec: the checkpoint's ``{name: (shape, dtype)}``.
        clients: K, from the benchmark the evaluator holds.
        max_file_bytes: largest file.
        max_total_bytes: largest sum of the files.
        check_values: also read every tensor and refuse NaN or infinity.

    Returns:
        The checked personalisations.

    Raises:
        InvalidSubmission: ``personal: personal/client_3.safetensors: ...`` naming what is wrong.
    """
    try:
        return read_personalisations(
            directory, spec, clients, max_file_bytes=max_file_bytes,
            max_total_bytes=max_total_bytes, check_values=check_values,
        )  # fmt: skip
    except PersonalisationError as error:
        message = str(error).replace(str(directory), PERSONAL_DIR)
        raise InvalidSubmission(PART, message.removeprefix(f"{PERSONAL_DIR}: ")) from None


def declared_frozen(metadata: dict[str, Any]) -> tuple[str, ...]:
    """The parameter-name prefixes the submission's method declares frozen (never sent).

    ``submission.json``'s ``method_options.frozen`` (``pflkit train`` writes it); anything that
    is not a list of strings counts as nothing declared.
    """
    options = metadata.get("method_options")
    frozen = options.get("frozen") if isinstance(options, dict) else None
    if not isinstance(frozen, list):
        return ()
    return tuple(prefix for prefix in frozen if isinstance(prefix, str) and prefix)


def frozen_replacements(
    personalisations: Personalisations, frozen: Sequence[str]
) -> dict[int, list[str]]:
    """Client -> the tensors its personalisation replaces under a declared-frozen prefix.

    A method that declares a part frozen sends nothing of it; a personalisation that changes it
    anyway is accepted, and flagged: whatever produced those values is traffic the log must
    count.
    """
    touched = {
        client: [name for name in names if name.startswith(tuple(frozen))]
        for client, names in personalisations.names.items()
    }
    return {client: names for client, names in touched.items() if names}
