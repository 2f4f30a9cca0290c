"""The one error type of submission validation."""

from __future__ import annotations


class InvalidSubmission(ValueError):
    """A participant's upload is invalid; the message is shown to the participant.

    Attributes:
        part: which part of the upload is at fault (``model``, ``communication_log``,
            ``privacy``, ``metadata``).
    """

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}")
        self.part = part
        self.message = message
