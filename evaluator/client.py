"""Participants' client: upload a run directory and wait for its score (``pflkit submit``).

The status reads revalidate: the evaluator sends each status answer with an ETag, and
:func:`wait` (``pflkit submit --wait``) and :func:`status` (``pflkit status``; a script's
repeated calls in one process) send the last one they got back in ``If-None-Match``, so that
while the record is unchanged the answer is a 304 without a body. (``pflkit status`` asks once
per process, so it has no earlier answer to revalidate.)
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from benchmark.submission_contract import PARTS, Part
from benchmark.tracks import common_parts

FINAL_STATES = {"finished", "rejected", "failed"}
#: a file of a per-client part's directory: ``client_{k}.safetensors`` is uploaded as the form
#: field ``{part}_{k}`` (the server refuses a k outside 0..K-1).
_CLIENT_FILE = re.compile(r"^client_([0-9]+)\.safetensors$")
#: the last status answers of this process by (URL, token): their ETag and body
_LAST_STATUS: OrderedDict[tuple[str, str], tuple[str, bytes]] = OrderedDict()
_LAST_STATUS_KEPT = 256
_LAST_STATUS_LOCK = threading.Lock()


class SubmitError(RuntimeError):
    """The upload was refused, or the server could not be reached."""


def run_files(run_dir: Path) -> dict[str, Path]:
    """The files of a run directory that make up a submission.

    Args:
        run_dir: a directory written by ``pflkit train``.

    Returns:
        Form field -> file, for the parts of ``benchmark.submission_contract.PARTS`` the run
        holds: one field per file, and ``personal_{k}`` for each
        ``personal/client_{k}.safetensors`` of a track-3 run.

    Raises:
        SubmitError: a part every track needs is missing, or ``personal/`` holds anything else.
    """
    required = common_parts()
    fields: dict[str, Path] = {}
    for part in PARTS.values():
        path = Path(run_dir) / part.run_path
        if part.per_client:
            fields.update(_client_files(part, path))
        elif path.is_file():
            fields[part.name] = path
        elif part.name in required:
            raise SubmitError(f"{path} is missing: a run directory needs {part.run_path}")
    return fields


def _client_files(part: Part, directory: Path) -> dict[str, Path]:
    """Form field ``{part}_{k}`` -> ``directory/client_{k}.safetensors`` (none without the
    directory).

    Raises:
        SubmitError: the directory holds anything else.
    """
    fields: dict[str, Path] = {}
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            match = _CLIENT_FILE.match(path.name)
            if match is None or not path.is_file():
                raise SubmitError(
                    f"{path}: {part.run_path}/ holds only client_{{k}}.safetensors files"
                )
            fields[f"{part.name}_{int(match.group(1))}"] = path
    return fields


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


def status(submission_id: str, *, server: str, token: str) -> dict[str, Any]:
    """A submission's public record now (its status, scores, and the organisers' re-run).

    Args:
        submission_id: the id returned by :func:`submit`.
        server: base URL of the evaluator.
        token: the team's API token.

    Returns:
        The record, as ``GET /api/v1/submissions/{id}`` gives it.

    Raises:
        SubmitError: the server refused the request (an unknown id, another team's
            submission, a wrong token) or could not be reached.
    """
    import httpx

    url = f"{server.rstrip('/')}/api/v1/submissions/{submission_id}"
    key = (url, token)
    with _LAST_STATUS_LOCK:
        last = _LAST_STATUS.get(key)
    headers = {"Authorization": f"Bearer {token}"}
    if last is not None:
        headers["If-None-Match"] = last[0]
    try:
        response = httpx.get(url, headers=headers, timeout=30)
    except httpx.HTTPError as error:
        raise SubmitError(f"cannot reach the evaluator at {server}: {error}") from None
    if response.status_code == 304 and last is not None:
        return json.loads(last[1])
    if response.status_code != 200:
        raise SubmitError(f"status request failed ({response.status_code}): {_detail(response)}")
    etag = response.headers.get("etag")
    if etag:
        with _LAST_STATUS_LOCK:
            _LAST_STATUS[key] = (etag, response.content)
            _LAST_STATUS.move_to_end(key)
            while len(_LAST_STATUS) > _LAST_STATUS_KEPT:
                _LAST_STATUS.popitem(last=False)
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
        SubmitError: the server refused the request or the wait timed out (saying, when no
            scoring worker runs, since when the submission waits for one).
    """
    import httpx

    deadline = time.monotonic() + timeout
    url = f"{server.rstrip('/')}/api/v1/submissions/{submission_id}"
    body: dict[str, Any] = {"status": "unknown"}
    etag: str | None = None  # of the last full answer, sent back: unchanged, it is a 304
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        while True:
            response = client.get(url, headers={"If-None-Match": etag} if etag else None)
            if response.status_code == 503:  # the service's database restarts: wait, ask again
                pause = _retry_after(response, interval)
            elif response.status_code == 304 and etag:  # unchanged: still not final
                pause = interval
            elif response.status_code != 200:
                raise SubmitError(
                    f"status request failed ({response.status_code}): {_detail(response)}"
                )
            else:
                body, pause = response.json(), interval
                etag = response.headers.get("etag")
                if body["status"] in FINAL_STATES:
                    return body
            if time.monotonic() > deadline:
                waiting = f": {body['waiting']}" if body.get("waiting") else ""
                raise SubmitError(
                    f"submission {submission_id} still {body['status']} after {timeout:.0f} s"
                    + waiting
                )
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0) + 0.01))


def _retry_after(response: Any, default: float) -> float:
    """The seconds a 503 asks to wait (``Retry-After``), else ``default``."""
    value = response.headers.get("retry-after", "")
    return min(float(value), 60.0) if value.isdigit() else default


def _content_type(field: str) -> str:
    """The Content-Type of a form field (a per-client part's fields are safetensors files)."""
    return PARTS[field].content_type if field in PARTS else "application/octet-stream"


def _detail(response: Any) -> str:
    """The error message of a FastAPI answer."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text[:500]
    return detail if isinstance(detail, str) else json.dumps(detail)[:500]
