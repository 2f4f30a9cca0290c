"""Re-scoring a submission, as the API's route and the organiser's page both ask for it."""

from __future__ import annotations

from fastapi import HTTPException, status
from sqlalchemy.orm import Session

from evaluator import crud
from evaluator.queue import TaskQueue
from evaluator.tables import Submission


def queue_rescore(session: Session, queue: TaskQueue, row: Submission, organiser: str) -> None:
    """Mark an ended submission for scoring again, commit, and put it on the queue.

    Raises:
        HTTPException: 409 while the submission has not ended (queued or being scored).
    """
    if not crud.request_rescore(session, submission_id=row.id, current_status=row.status,
                                requested_by=organiser):
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"submission is {row.status}; wait for it to end"
        )
    session.commit()
    queue.enqueue(row.id)
