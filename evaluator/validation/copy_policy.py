"""The copy policy of an upload: a checkpoint that repeats an earlier live submission's.

Checked while the upload's row is moved to ``queued`` (the caller holds the locks on the
checkpoint's digest and the team, ``crud.lock_checkpoint`` and ``crud.lock_team``), so two
identical uploads cannot both pass.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from evaluator import crud


class CopyRefused(Exception):
    """An upload whose checkpoint repeats an earlier live submission's (HTTP 409)."""


def apply_copy_policy(session: Session, *, submission_id: str, team_id: int, track: int,
                      model_sha256: str, policy: str) -> str | None:  # fmt: skip
    """Apply the copy policy to an upload's checkpoint digest.

    The digest is of the tensors, not of the file (:mod:`evaluator.validation.tensor_digest`):
    a checkpoint re-saved with another header or tensor order is the same checkpoint. Within one
    track, a team's own identical checkpoint is always refused (its quota is left as it was);
    another team's is refused or, with the ``flag`` policy, accepted and flagged for the
    organisers.

    Args:
        session: open session holding the locks on the digest and the team.
        submission_id: the upload.
        team_id: its team.
        track: its track.
        model_sha256: the digest of its checkpoint's tensors.
        policy: ``refuse`` or ``flag`` (``Settings.copy_policy``).

    Returns:
        The id of the original when the upload is accepted as a flagged copy, else None.

    Raises:
        CopyRefused: the upload is a copy the policy refuses.
    """
    original = crud.find_copy(
        session, model_sha256=model_sha256, track=track, exclude_id=submission_id
    )
    if original is None:
        return None
    if original.team_id == team_id:
        raise CopyRefused(
            f"this checkpoint is identical to your submission {original.id}; nothing was stored "
            "and your daily quota is unchanged"
        )
    if policy == "refuse":
        raise CopyRefused(
            "this checkpoint is identical to one another team submitted earlier; copies are "
            "refused (write to the organisers if you think this is wrong)"
        )
    return original.id
