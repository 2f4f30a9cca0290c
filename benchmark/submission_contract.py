"""The submission contract: the files of a run directory, the upload parts they become, and
the names and size limits under which the evaluator stores them.

``pflkit train`` writes a run directory (``baselines.run_directory``, ``baselines.submission``),
``pflkit submit`` uploads some of its files, one form field per part (``evaluator.client``), and
the evaluator stores each part under its own name (``evaluator.storage``). All of them read the
names here, so a file is renamed, or a part added, in one place::

    RUN_DIR/checkpoint/model.safetensors   part "model"                  stored model.safetensors
    RUN_DIR/communication_log.csv          part "communication_log"      stored communication_log.csv
    RUN_DIR/communication_log.jsonl        part "communication_details"  stored communication_log.jsonl
    RUN_DIR/submission.json                part "metadata"               stored metadata.json
    RUN_DIR/privacy.json                   part "privacy"                stored privacy.json
    RUN_DIR/recipe.json                    part "recipe"                 stored recipe.json
    RUN_DIR/personal/client_{k}.safetensors  fields "personal_{k}"       stored personal/client_{k}...

Which parts a submission needs depends on its track (``benchmark.tracks``: ``Track.parts``).
A part's size limit is an evaluator setting; :attr:`Part.limit_setting` names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: the directory of the final model in a run directory.
CHECKPOINT_DIR = "checkpoint"
#: the model file of a checkpoint directory, and of a stored submission.
MODEL_FILE = "model.safetensors"
#: the competition's communication log, one row per message.
COMMUNICATION_LOG = "communication_log.csv"
#: the same messages with the tensors each carried, their wire format and digests.
COMMUNICATION_DETAILS = "communication_log.jsonl"
#: the run's description (method, track, rounds, byte totals).
SUBMISSION_FILE = "submission.json"
#: the name the evaluator stores ``submission.json`` under.
STORED_METADATA = "metadata.json"
#: a track-2 run's privacy declaration.
PRIVACY_FILE = "privacy.json"
#: how the run was trained (``benchmark.recipe``), organiser-only: its seed is a secret.
RECIPE_FILE = "recipe.json"
#: a track-3 run's personalisations, one ``client_{k}.safetensors`` per client.
PERSONAL_DIR = "personal"
#: the run's configuration (not uploaded).
CONFIG_FILE = "config.json"
#: one line per completed round (not uploaded).
METRICS_FILE = "metrics.jsonl"
#: the resumable state of the last completed round (not uploaded).
STATE_DIR = "state"

#: a personalisation file's name: ``client_{k}`` for k = 0..999999, no leading zeros.
PERSONAL_FILE = re.compile(r"^client_(0|[1-9][0-9]{0,5})\.safetensors$")
#: the form field of client k's personalisation: ``personal_{k}``.
PERSONAL_FIELD = re.compile(r"^personal_(0|[1-9][0-9]{0,5})$")


def personal_file_name(client: int) -> str:
    """``client_{k}.safetensors``."""
    return f"client_{client}.safetensors"


def personal_field(client: int) -> str:
    """``personal_{k}``, the form field of client k's personalisation."""
    return f"personal_{client}"


@dataclass(frozen=True)
class Part:
    """One upload part of a submission.

    Attributes:
        name: the form field (the key of :data:`PARTS`).
        run_path: where a run directory holds it, relative to the directory.
        stored_name: where the evaluator stores it, relative to the submission's directory.
        content_type: the Content-Type ``pflkit submit`` sends.
        description: what it is, for messages ("track 2 needs a privacy declaration").
        limit_setting: the evaluator setting that bounds its bytes (per file for a
            per-client part).
        per_client: a directory of ``client_{k}.safetensors`` files uploaded as the fields
            ``{name}_{k}``, rather than one file.
    """

    name: str
    run_path: str
    stored_name: str
    content_type: str
    description: str
    limit_setting: str
    per_client: bool = False


#: form field -> part, in upload order: the metadata comes before any per-client part (the
#: evaluator reads the track from it before it accepts a personalisation).
PARTS: dict[str, Part] = {
    part.name: part
    for part in (
        Part("model", f"{CHECKPOINT_DIR}/{MODEL_FILE}", MODEL_FILE, "application/octet-stream",
             "a checkpoint", "max_model_bytes"),
        Part("communication_log", COMMUNICATION_LOG, COMMUNICATION_LOG, "text/csv",
             "a communication log", "max_log_bytes"),
        Part("communication_details", COMMUNICATION_DETAILS, COMMUNICATION_DETAILS,
             "application/jsonl", "the detailed communication log", "max_details_bytes"),
        Part("metadata", SUBMISSION_FILE, STORED_METADATA, "application/json",
             "submission metadata", "max_json_bytes"),
        Part("privacy", PRIVACY_FILE, PRIVACY_FILE, "application/json",
             "a privacy declaration", "max_json_bytes"),
        Part("recipe", RECIPE_FILE, RECIPE_FILE, "application/json",
             "a training recipe", "max_recipe_bytes"),
        Part("personal", PERSONAL_DIR, PERSONAL_DIR, "application/octet-stream",
             f"per-client personalisations ({PERSONAL_DIR}/client_{{k}}.safetensors)",
             "max_personal_file_bytes", per_client=True),
    )
}  # fmt: skip


def get_part(name: str) -> Part:
    """The part with this form field.

    Raises:
        KeyError: naming the parts the contract has.
    """
    if name not in PARTS:
        raise KeyError(f"unknown upload part {name!r}; the contract has {', '.join(PARTS)}")
    return PARTS[name]


def stored_name(part: str) -> str:
    """Where the evaluator stores a part, relative to the submission's directory."""
    return get_part(part).stored_name
