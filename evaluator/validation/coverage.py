"""What the evaluator checks today, worded for the leaderboard's pages.

The pages' rules text is taken from here, and each sentence is written next to the name of the
module whose checks it describes, so that a page never says less (or more) than the worker
does. The tests of those modules reject what the sentences say is rejected.
"""

from __future__ import annotations

#: the binding of the logs to the checkpoint (:mod:`evaluator.validation.binding`) and the byte
#: tally (:mod:`evaluator.validation.commlog`).
BYTES_CHECKED = (
    "The bytes are the evaluator's tally of the uploaded communication log, bound to the "
    "checkpoint: every tensor that differs from the base must have travelled in a client "
    "message (in full, or as a LoRA adapter whose merged change stays within the declared "
    "rank), and every message must claim at least the bytes its wire format needs for the "
    "tensors it names (fp32: 4 bytes a value; NF4: the packed size)"
)
#: what the binding cannot see (docs/organisers/evaluator.md).
BYTES_NOT_CHECKED = (
    "a message that claims more bytes than it needed, or tensors that travelled and changed "
    "nothing, are not detected: the log is still the participant's account of the run"
)
