"""Database operations of the evaluator (keyword-only; the routes and the worker call these).

One module per resource: ``teams.py``, ``quota.py``, ``submissions.py`` (reservation and the
state machine, :func:`transition`), ``leases.py`` (the worker's claim and the reaper's moves),
``board.py`` (the leaderboard's version), ``figures.py`` (a submission's track figures),
``copies.py``, ``flags.py``,
``organiser_sessions.py``, ``status_reads.py`` (the status endpoint's one-query reads) and
``workers.py`` (the scoring workers' registry and heartbeats, the queue's depth).
Callers use ``from evaluator import crud`` and ``crud.<name>``: every public name is here.
"""

from evaluator.crud.board import board_changed, board_state, board_version
from evaluator.crud.copies import find_copy, lock_checkpoint
from evaluator.crud.figures import figures_of, split_figures, write_figures
from evaluator.crud.flags import set_flags
from evaluator.crud.leases import (
    claim,
    expired_leases,
    queued,
    renew_lease,
    requeue_expired,
    stale_received,
)
from evaluator.crud.organiser_sessions import (
    create_organiser_session,
    end_organiser_session,
    organiser_by_session,
)
from evaluator.crud.quota import QuotaExceeded, day_start, used_quota
from evaluator.crud.reproductions import (
    claim_reproduction,
    queue_reproduction,
    record_reproduction,
    requeue_abandoned_reproductions,
)
from evaluator.crud.status_reads import (
    Caller,
    StatusRead,
    caller_by_token,
    status_polls,
    submission_for_token,
)
from evaluator.crud.submissions import (
    delete_submission,
    get_submission,
    list_submissions,
    request_rescore,
    reserve_submission,
    transition,
)
from evaluator.crud.teams import InvalidTeamName, TeamExists, create_team, lock_team, team_by_token
from evaluator.crud.workers import (
    Liveness,
    QueueState,
    beat,
    list_workers,
    liveness,
    queue_state,
    recent_failures,
    register_worker,
    set_worker_state,
    worker_by_pid,
)

__all__ = [
    "figures_of",
    "split_figures",
    "write_figures",
    "claim_reproduction",
    "queue_reproduction",
    "record_reproduction",
    "requeue_abandoned_reproductions",
    "Caller",
    "InvalidTeamName",
    "Liveness",
    "QueueState",
    "QuotaExceeded",
    "StatusRead",
    "TeamExists",
    "beat",
    "board_changed",
    "board_state",
    "board_version",
    "caller_by_token",
    "claim",
    "create_organiser_session",
    "create_team",
    "day_start",
    "delete_submission",
    "end_organiser_session",
    "expired_leases",
    "find_copy",
    "get_submission",
    "list_submissions",
    "list_workers",
    "liveness",
    "lock_checkpoint",
    "lock_team",
    "organiser_by_session",
    "queue_state",
    "queued",
    "recent_failures",
    "register_worker",
    "renew_lease",
    "request_rescore",
    "requeue_expired",
    "reserve_submission",
    "set_flags",
    "set_worker_state",
    "stale_received",
    "status_polls",
    "submission_for_token",
    "team_by_token",
    "transition",
    "used_quota",
    "worker_by_pid",
]
