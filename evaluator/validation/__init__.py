"""Validation of everything a participant uploads: checkpoint, communication log, declaration.

Each validator raises :class:`InvalidSubmission` with a message that says what is wrong and what
to do; the message never quotes the hidden test data (the validators never see it).
"""

from evaluator.validation.errors import InvalidSubmission

__all__ = ["InvalidSubmission"]
