"""Serialised status views, kept per submission, precision and change version (one per process).

Every change to what a submission's status view shows (its state, results, transitions, an
organiser's action) marks the submission with the new board version in the same transaction
(``crud.board_changed``, ``submissions.board_version``), so a view read when the submission's
mark was V is exact for as long as the mark is V, however the rest of the board moves. A status
request then costs a share of one short query and a dictionary look-up: the status requests
that arrive together are checked at once (:func:`shared_polls`, ``crud.status_polls``: the
callers by token hash and the submissions' marks, a read that started after each of them
arrived), so every token is checked on every request (a revoked one is refused at once), and
the view is shown only to its team or an organiser, as the full read does.

Every status answer carries an ETag, a digest of its body (:func:`status_answer`), and
``Cache-Control: no-cache, private``; a poller that sends it back in ``If-None-Match`` gets a
``304 Not Modified`` without the body while the view is the same. The token and the team are
checked first, as for a full answer: a 304 tells nothing a 200 would not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from evaluator import crud
from evaluator.api.fast_reads import Answer, etag, header, not_modified
from evaluator.core.security import hash_token
from evaluator.core.shared_read import SharedRead
from evaluator.crud import Caller

MAX_VIEWS = 2048
#: the scope key under which :func:`fast_status` leaves its poll read for the route
POLL_KEY = "pflkit.status_poll"
#: how a queued submission's serialised view shows its state (``SubmissionPublic``'s JSON): a
#: queued view says whether a worker is live, which the route reads
QUEUED = b'"status":"queued"'

#: a status poll as read: the caller and the polled submission's change version (None: no
#: such submission); None for an unknown token
Poll = tuple[Caller, int | None]


class StatusViews:
    """A thread-safe LRU of ``(submission id, full precision, change version)`` -> the owner
    team's id and the JSON body.

    Args:
        max_views: entries kept; the least recently used goes first.
    """

    def __init__(self, max_views: int = MAX_VIEWS) -> None:
        self.max_views = max_views
        self._views: OrderedDict[tuple[str, bool, int], tuple[int, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, submission_id: str, *, full_precision: bool, changed: int | None
    ) -> tuple[int, bytes] | None:
        """The owner's team id and the body read when the submission's change version was
        ``changed`` (None: the submission does not exist, nothing is kept)."""
        if changed is None:
            return None
        key = (submission_id, full_precision, changed)
        with self._lock:
            hit = self._views.get(key)
            if hit is not None:
                self._views.move_to_end(key)
            return hit

    def put(
        self, submission_id: str, *, full_precision: bool, changed: int, owner_team_id: int,
        body: bytes,
    ) -> None:  # fmt: skip
        """Keep a body read when the submission's change version was ``changed``."""
        key = (submission_id, full_precision, changed)
        with self._lock:
            self._views[key] = (owner_team_id, body)
            self._views.move_to_end(key)
            while len(self._views) > self.max_views:
                self._views.popitem(last=False)


def shared_polls(sessions: Callable[[], Session]) -> SharedRead[tuple[str, str], Poll]:
    """The status requests that arrive together, by (token hash, submission id), read in one
    query (``crud.status_polls``) from a session of ``sessions`` (the app's read sessions)."""

    def read(keys: frozenset[tuple[str, str]]) -> dict[tuple[str, str], Poll]:
        with sessions() as session:
            callers, changed = crud.status_polls(
                session, token_hashes={k[0] for k in keys}, submission_ids={k[1] for k in keys}
            )
        return {(token_hash, submission_id): (callers[token_hash], changed.get(submission_id))
                for token_hash, submission_id in keys if token_hash in callers}  # fmt: skip

    return SharedRead(read)


async def poll(app: Any, token: str, submission_id: str) -> Poll | None:
    """The caller of ``token`` and the submission's change version, from the app's shared read
    (a read that started after this call); None for an unknown token."""
    return await app.state.status_polls.get((hash_token(token), submission_id))


def kept_view(app: Any, submission_id: str, read: Poll) -> tuple[int, bytes] | None:
    """The kept view of the submission for the caller of ``read``, if one is kept."""
    caller, changed = read
    views: StatusViews = app.state.status_views
    return views.get(submission_id, full_precision=caller.is_organiser, changed=changed)


async def fast_status(app: Any, scope: dict[str, Any], submission_id: str | None) -> Answer | None:
    """``GET /api/v1/submissions/{id}`` from the kept view (``evaluator.api.fast_reads``).

    The caller and the submission's change version are read by the app's shared read and left
    in the scope for the route; the kept view is sent when the caller may see it and it is not
    queued. Anything else (no or a malformed token, a throttled address, an unknown token, no
    kept view, another team's submission, a queued view) is the route's.
    """
    if submission_id is None:
        return None
    authorization = header(scope, b"authorization")
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    client = scope.get("client")
    if app.state.throttle.retry_after(client[0] if client else "unknown") is not None:
        return None
    read = scope[POLL_KEY] = await poll(app, token, submission_id)
    if read is None:
        return None
    hit = kept_view(app, submission_id, read)
    if hit is None or QUEUED in hit[1]:
        return None
    owner_team_id, body = hit
    caller = read[0]
    if owner_team_id != caller.team_id and not caller.is_organiser:
        return None
    return status_answer(body, header(scope, b"if-none-match"))


def status_answer(body: bytes, if_none_match: str | None) -> Answer:
    """The answer with a status view's JSON ``body``: 200 with the body and its ETag, or 304
    without it when ``if_none_match`` names that ETag.

    Args:
        body: the view's JSON, for a caller who may see it.
        if_none_match: the request's ``If-None-Match`` header.

    Returns:
        The status code, the headers (lower-case names) and the body.
    """
    tag = etag(body)
    validators = [(b"etag", tag), (b"cache-control", b"no-cache, private")]
    if not_modified(if_none_match, tag):
        return 304, validators, b""
    return 200, [(b"content-length", str(len(body)).encode()),
                 (b"content-type", b"application/json"), *validators], body  # fmt: skip


def status_response(request: Request, body: bytes) -> Response:
    """:func:`status_answer` to ``request`` as a response (the route's; the same headers as the
    fast answer's)."""
    code, headers, content = status_answer(body, request.headers.get("if-none-match"))
    response = Response(status_code=code)
    response.body = content
    response.raw_headers = headers
    return response
