"""Submissions: upload a run (202), read one's status and results, list one's own, re-score.

The upload route orchestrates: it streams the parts to disk (``evaluator.storage``), checks them
(``evaluator.validation.upload.check_upload``), stores them, applies the copy policy
(``evaluator.validation.copy_policy``) and queues the submission; the schema of its body is
the contract's (``evaluator.api.upload_schema``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, NoReturn

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from benchmark.submission_contract import stored_name
from evaluator import crud
from evaluator.api.deps import (
    BearerDep,
    CurrentTeam,
    Organiser,
    QueueDep,
    SessionDep,
    SettingsDep,
    StoreDep,
    bearer_token,
    read_as_team,
    refuse_unknown_token,
)
from evaluator.api.rescore import queue_rescore
from evaluator.api.responses import (
    DATABASE_UNAVAILABLE,
    NOT_ENDED,
    NOT_FOUND,
    NOT_MODIFIED,
    ORGANISER_AUTH,
    TEAM_AUTH,
    UNAUTHORISED,
)
from evaluator.api.status_views import (
    POLL_KEY,
    QUEUED,
    Poll,
    StatusViews,
    kept_view,
    poll,
    status_response,
)
from evaluator.api.upload_schema import upload_body
from evaluator.api.worker_watch import WorkerWatch, waiting_note, waiting_since
from evaluator.benchmark_info import clients_of
from evaluator.crud import Caller, Liveness
from evaluator.schemas import SubmissionAccepted, SubmissionList, SubmissionPublic
from evaluator.storage import (
    PersonalLimits,
    SubmissionStore,
    UploadError,
    receive_multipart,
    storage_full,
    upload_limits,
)
from evaluator.submission_metadata import SubmissionMetadata
from evaluator.tables import Status, Submission, Team
from evaluator.validation import InvalidSubmission
from evaluator.validation.copy_policy import CopyRefused, apply_copy_policy
from evaluator.validation.tensor_digest import submission_fingerprint
from evaluator.validation.upload import check_upload

logger = logging.getLogger("evaluator.api")
router = APIRouter(prefix="/api/v1/submissions", tags=["submissions"])


def _reserve(sessions: sessionmaker[Session], team_id: int, quota: int) -> str:
    """Create the ``received`` row within the quota (one short transaction)."""
    with sessions() as session, session.begin():
        return crud.reserve_submission(
            session, team_id=team_id, quota=quota, track=0, method="(uploading)"
        ).id


def _abandon(sessions: sessionmaker[Session], store: SubmissionStore, submission_id: str) -> None:
    """Remove every trace of an upload that was not accepted."""
    store.discard(submission_id)
    with sessions() as session, session.begin():
        crud.delete_submission(session, submission_id=submission_id)


def _mark_queued(
    sessions: sessionmaker[Session],
    store: SubmissionStore,
    submission_id: str,
    metadata: SubmissionMetadata,
    *,
    team_id: int,
    model_sha256: str,
    copy_policy: str,
) -> None:
    """Apply the copy policy, fill in the row from the metadata and move it to ``queued``.

    The checkpoint's hash is locked first, then the team's row (as for the quota), so two
    identical uploads, of one team or of two, cannot both pass the copy check.

    Raises:
        CopyRefused: the checkpoint repeats an earlier live submission.
    """
    model = store.file(submission_id, "model")
    with sessions() as session, session.begin():
        crud.lock_checkpoint(session, model_sha256=model_sha256)
        crud.lock_team(session, team_id=team_id)
        copy_of = apply_copy_policy(session, submission_id=submission_id, team_id=team_id,
                               track=metadata.track, model_sha256=model_sha256,
                               policy=copy_policy)  # fmt: skip
        row = session.get(Submission, submission_id)
        row.model_sha256 = model_sha256
        row.copy_of = copy_of
        row.track = metadata.track
        row.method = metadata.method
        row.family = metadata.family
        row.description = metadata.description
        row.submission_metadata = metadata.model_dump(mode="json")
        row.model_bytes = model.stat().st_size
        row.has_privacy = store.file(submission_id, "privacy").is_file()
        session.flush()
        crud.transition(
            session,
            submission_id=submission_id,
            from_status=Status.RECEIVED,
            to_status=Status.QUEUED,
            detail="upload complete"
            + (f"; flagged: identical checkpoint to submission {copy_of}" if copy_of else ""),
        )


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SubmissionAccepted,
    openapi_extra=upload_body(),
    responses={
        **UNAUTHORISED,
        409: {"description": "the checkpoint repeats an earlier submission (copy policy)"},
        413: {"description": "a part or the body exceeds its size limit"},
        415: {"description": "not multipart/form-data"},
        422: {"description": "invalid part (the message says which and why)"},
        429: {"description": "daily quota reached (try again after 00:00 UTC), or too many "
                             "failed authentications from this address (wait the "
                             "`Retry-After` seconds)"},
        503: {"description": "the database is unavailable for a moment; nothing was kept: "
                             "retry after `Retry-After` seconds"},
        507: {"description": "the evaluator's storage is full; nothing was kept"},
    },
)
async def create_submission(
    request: Request, team: CurrentTeam, settings: SettingsDep, store: StoreDep, queue: QueueDep
) -> SubmissionAccepted:
    """Upload a run: streamed to disk within the limits, checked, stored atomically, queued."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > settings.max_request_bytes:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"the upload exceeds the limit of {settings.max_request_bytes} bytes",
        )
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send the submission as multipart/form-data"
        )
    sessions = request.app.state.sessions
    try:
        submission_id = await run_in_threadpool(_reserve, sessions, team.id, settings.daily_quota)
    except crud.QuotaExceeded as exc:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc)) from None
    limits = upload_limits(settings)
    try:
        received = await receive_multipart(
            request.stream(),
            content_type,
            store.incoming(submission_id),
            limits=limits,
            max_total=settings.max_request_bytes,
            personal=PersonalLimits(
                clients=clients_of(settings.data_dir),
                max_file_bytes=settings.max_personal_file_bytes,
                max_total_bytes=settings.max_personal_bytes,
            ),
        )
        metadata = await run_in_threadpool(
            check_upload, store.incoming(submission_id), settings, received.metadata
        )
        fingerprint = await run_in_threadpool(partial(
            submission_fingerprint, store.incoming(submission_id), model=stored_name("model"),
            max_header_bytes=settings.max_header_bytes, max_tensors=settings.max_tensors,
        ))  # fmt: skip
        await run_in_threadpool(store.commit, submission_id)
        mark = partial(
            _mark_queued,
            team_id=team.id,
            model_sha256=fingerprint,
            copy_policy=settings.copy_policy,
        )
        await run_in_threadpool(mark, sessions, store, submission_id, metadata)
    except UploadError as exc:
        await run_in_threadpool(_abandon, sessions, store, submission_id)
        if exc.status_code == status.HTTP_507_INSUFFICIENT_STORAGE:
            _refuse_full_storage(submission_id, exc)
        raise HTTPException(exc.status_code, exc.message) from None
    except InvalidSubmission as exc:
        await run_in_threadpool(_abandon, sessions, store, submission_id)
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    except CopyRefused as exc:
        await run_in_threadpool(_abandon, sessions, store, submission_id)
        raise HTTPException(status.HTTP_409_CONFLICT, f"model: {exc}") from None
    except OSError as exc:  # a full disk while the upload was flushed or moved into place
        await run_in_threadpool(_abandon, sessions, store, submission_id)
        _refuse_full_storage(submission_id, storage_full(exc))
    except BaseException:
        await run_in_threadpool(_abandon, sessions, store, submission_id)
        raise
    try:
        await run_in_threadpool(queue.enqueue, submission_id)
    except Exception as exc:  # the reaper re-sends queued submissions the queue does not hold
        logger.warning(
            "enqueue of %s failed (%s); the reaper will re-send it",
            submission_id,
            type(exc).__name__,
        )
    logger.info("team %s submitted %s (track %s)", team.name, submission_id, metadata.track)
    return SubmissionAccepted(
        id=submission_id,
        status=Status.QUEUED,
        url=str(request.url_for("get_submission", submission_id=submission_id)),
    )


def _refuse_full_storage(submission_id: str, exc: UploadError) -> NoReturn:
    """Log a full storage for the organisers and answer 507 (the upload is already removed)."""
    logger.error("the storage is full: upload %s refused and removed", submission_id)
    raise HTTPException(exc.status_code, exc.message, headers={"Retry-After": "600"}) from None


def _visible(row: Submission | None, team: Any) -> Submission:
    """The row if the caller may see it; 404 otherwise (other teams' ids are not confirmed)."""
    if row is None or (row.team_id != team.id and not team.is_organiser):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission for this token")
    return row


def _json(model: SubmissionPublic | SubmissionList) -> Response:
    """The view as JSON (already validated: FastAPI's second validation pass is skipped)."""
    return Response(model.model_dump_json(), media_type="application/json")


@router.get(
    "/{submission_id}",
    response_model=SubmissionPublic,
    name="get_submission",
    responses={**NOT_MODIFIED, **TEAM_AUTH, **NOT_FOUND, **DATABASE_UNAVAILABLE},
)
async def get_submission(submission_id: str, request: Request, credentials: BearerDep) -> Response:
    """Status, transitions and results of one submission (its team or an organiser).

    The most polled endpoint. The token is checked, and the submission's change version read, by
    a query that starts after the request arrived and serves every status request that arrived
    with it (``app.state.status_polls``, ``evaluator.core.shared_read``); the view then comes
    from ``status_views`` when the submission did not change since it was read, in the event
    loop (usually before this route: ``status_views.fast_status``). Otherwise one worker thread
    reads it with one query (``crud.submission_for_token``), on PostgreSQL outside a
    transaction.
    """
    token = bearer_token(request, credentials)
    if POLL_KEY in request.scope:  # read by evaluator.api.status_views.fast_status
        read: Poll | None = request.scope[POLL_KEY]
    else:
        read = await poll(request.app, token, submission_id)
    if read is None:
        refuse_unknown_token(request)
    hit = kept_view(request.app, submission_id, read)
    if hit is None or QUEUED in hit[1]:
        body = await run_in_threadpool(_status_body, request, token, read[0], submission_id, hit)
    else:
        body = _kept_body(hit, read[0])
    return status_response(request, body)  # with its ETag; a 304 to a matching If-None-Match


def _status_body(
    request: Request, token: str, caller: Caller, submission_id: str,
    hit: tuple[int, bytes] | None,
) -> bytes:  # fmt: skip
    """The JSON body of :func:`get_submission` when the kept view is missing or queued (runs in
    a worker thread): the view read in one query (``crud.submission_for_token``, which checks
    the token again) and kept, a queued one with its wait for a worker."""
    views: StatusViews = request.app.state.status_views
    if hit is None:
        with request.app.state.read_sessions() as session:
            read = crud.submission_for_token(session, token=token, submission_id=submission_id)
        if read is None:  # the token was revoked meanwhile
            refuse_unknown_token(request)
        if read.view is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission for this token")
        hit = (read.owner_team_id, read.view.model_dump_json().encode())
        views.put(submission_id, full_precision=read.caller.is_organiser,
                  changed=read.changed_version, owner_team_id=hit[0], body=hit[1])  # fmt: skip
        caller = read.caller
    body = _kept_body(hit, caller)
    if QUEUED in body:
        return _with_waiting(request.app.state.worker_watch, body)
    return body


def _kept_body(hit: tuple[int, bytes], caller: Caller) -> bytes:
    """A kept view's body when ``caller`` may see it (its team's or an organiser).

    Raises:
        HTTPException: 404, the same answer as for a submission that does not exist.
    """
    owner_team_id, body = hit
    if owner_team_id != caller.team_id and not caller.is_organiser:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such submission for this token")
    return body


def _with_waiting(watch: WorkerWatch, body: bytes) -> bytes:
    """A queued submission's view, saying since when it waits when no worker is live.

    Only queued views pay for it: one liveness query a second per process
    (:class:`WorkerWatch`), and a JSON round trip while no worker is live.
    """
    liveness = watch.current()
    if liveness.live:
        return body
    view = SubmissionPublic.model_validate_json(body)
    return _waiting_view(view, liveness).model_dump_json().encode()


def _waiting_view(view: SubmissionPublic, liveness: Liveness) -> SubmissionPublic:
    """``view`` with ``waiting_for_worker_since`` and ``waiting`` set when it is queued and no
    worker is live."""
    if view.status != Status.QUEUED:
        return view
    since = waiting_since(liveness, view.queued_at)
    if since is None:
        return view
    return view.model_copy(
        update={"waiting_for_worker_since": since, "waiting": waiting_note(since)}
    )


@router.get("", response_model=SubmissionList, responses={**TEAM_AUTH, **DATABASE_UNAVAILABLE})
async def list_submissions(
    request: Request,
    credentials: BearerDep,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000),
    all_teams: bool = Query(False, description="organisers: every team's"),
) -> Response:
    """The caller's submissions, newest first (every team's for an organiser with all_teams)."""

    def read(session: Session, team: Team) -> SubmissionList:
        team_id = None if (all_teams and team.is_organiser) else team.id
        rows = crud.list_submissions(session, team_id=team_id, limit=limit, offset=offset)
        views = [SubmissionPublic.from_row(row, full_precision=team.is_organiser) for row in rows]
        if any(view.status == Status.QUEUED for view in views):
            liveness = request.app.state.worker_watch.current()
            views = [_waiting_view(view, liveness) for view in views]
        return SubmissionList(submissions=views)

    return _json(await read_as_team(request, credentials, read))


@router.post(
    "/{submission_id}/rescore",
    response_model=SubmissionPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**ORGANISER_AUTH, **NOT_FOUND, **NOT_ENDED, **DATABASE_UNAVAILABLE},
)
def rescore(
    submission_id: str, organiser: Organiser, session: SessionDep, queue: QueueDep
) -> SubmissionPublic:
    """Organisers: score a finished, rejected or failed submission again."""
    row = _visible(crud.get_submission(session, submission_id=submission_id), organiser)
    queue_rescore(session, queue, row, organiser.name)
    session.expire_all()
    return SubmissionPublic.from_row(
        crud.get_submission(session, submission_id=submission_id), full_precision=True
    )
