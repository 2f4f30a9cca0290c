"""Participants' client: upload a run directory and wait for its score (``pflkit submit``)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

RUN_FILES = {
    "model": ("checkpoint/model.safetensors", "application/octet-stream"),
    "communication_log": ("communication_log.csv", "text/csv"),
    "communication_details": ("communication_log.jsonl", "application/jsonl"),
    "privacy": ("privacy.json", "application/json"),
    "metadata": ("submission.json", "application/json"),
}
OPTIONAL = {"privacy"}
FINAL_STATES = {"finished", "rejected", "failed"}
#: track 3: ``personal/client_{k}.safetensors`` is uploaded as the form field ``personal_{k}``.
PERSONAL_DIR = "personal"
_PERSONAL_FILE = re.compile(r"^client_([0-9]+)\.safetensors$")


class SubmitError(RuntimeError):
    """The upload was refused, or the server could not be reached."""


def run_files(run_dir: Path) -> dict[str, Path]:
    """The files of a run directory that make up a submission.

    Args:
        run_dir: a directory written by ``pflkit train``.

    Returns:
        Form field -> file: the parts of :data:`RUN_FILES`, and ``personal_{k}`` for each
        ``personal/client_{k}.safetensors`` of a track-3 run.

    Raises:
        SubmitError: a required file is missing, or ``personal/`` holds anything else.
    """
    parts: dict[str, Path] = {}
    for part, (relative, _) in RUN_FILES.items():
        path = Path(run_dir) / relative
        if path.is_file():
            parts[part] = path
        elif part not in OPTIONAL:
            raise SubmitError(f"{path} is missing: a run directory needs {relative}")
    personal = Path(run_dir) / PERSONAL_DIR
    if personal.is_dir():
        for path in sorted(personal.iterdir()):
            match = _PERSONAL_FILE.match(path.name)
            if match is None or not path.is_file():
                raise SubmitError(
                    f"{path}: {PERSONAL_DIR}/ holds only client_{{k}}.safetensors files"
                )
            parts[f"personal_{int(match.group(1))}"] = path
    return parts


def submit(run_dir: Path, *, server: str, token: str, timeout: float = 600.0) -> dict[str, Any]:
    """Upload a run directory.

    Args:
        run_dir: the run directory.
        server: base URL of the evaluator, e.g. ``http://127.0.0.1:8000``.
        token: the team's API token.
        timeout: seconds allowed for the upload.

    Returns:
        The server's answer (``id``, ``status``, ``url``).

    Raises:
        SubmitError: with the server's reason when the upload is refused.
    """
    import httpx

    parts = run_files(run_dir)
    handles = {part: path.open("rb") for part, path in parts.items()}
    try:
        files = {
            part: (path.name, handles[part], _content_type(part)) for part, path in parts.items()
        }
        try:
            response = httpx.post(
                f"{server.rstrip('/')}/api/v1/submissions",
                files=files,
                headers={"Authorization": f"Bearer {token}"},
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise SubmitError(f"could not reach {server}: {exc}") from None
    finally:
        for handle in handles.values():
            handle.close()
    if response.status_code != 202:
        raise SubmitError(
            f"the server refused the submission ({response.status_code}): {_detail(response)}"
        )
    return response.json()


def wait(
    submission_id: str, *, server: str, token: str, timeout: float = 3600.0, interval: float = 1.0
) -> dict[str, Any]:
    """Poll a submission until it is finished, rejected or failed.

    Args:
        submission_id: the id returned by :func:`submit`.
        server: base URL of the evaluator.
        token: the team's API token.
        timeout: seconds to wait at most.
        interval: seconds between polls.

    Returns:
        The submission's final public record.

    Raises:
        SubmitError: the server refused the request or the wait timed out.
    """
    import httpx

    deadline = time.monotonic() + timeout
    url = f"{server.rstrip('/')}/api/v1/submissions/{submission_id}"
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        while True:
            response = client.get(url)
            if response.status_code != 200:
                raise SubmitError(
                    f"status request failed ({response.status_code}): {_detail(response)}"
                )
            body = response.json()
            if body["status"] in FINAL_STATES:
                return body
            if time.monotonic() > deadline:
                raise SubmitError(
                    f"submission {submission_id} still {body['status']} after {timeout:.0f} s"
                )
            time.sleep(interval)


def _content_type(field: str) -> str:
    """The Content-Type of a form field (personalisations are safetensors files)."""
    return RUN_FILES[field][1] if field in RUN_FILES else "application/octet-stream"


def _detail(response: Any) -> str:
    """The error message of a FastAPI answer."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:500]
    return detail if isinstance(detail, str) else json.dumps(detail)[:500]
