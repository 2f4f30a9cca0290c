"""Every submission's ranking row, kept per database between builds of the leaderboard.

Reading and converting all rows was most of a rebuild's time with 10,000 submissions. The
evaluator marks each changed submission with the board version of its change, in the change's
transaction (``crud.board_changed``), so a rebuild reads only the rows marked after the
version the kept rows were read at and puts them in place of the kept ones (by id).

Why that equals a full read: the version's row lock serialises the changes, so once version V
is visible every change marked V or lower is too. The rows are read after the version, so they
hold every change up to it and perhaps later ones, which the next read reads again (putting a
row in place is idempotent). A change no marker can show (a deleted submission) advances
``unmarked_version``; kept rows older than it, or a version that went back (another database at
the same address), are read again in full.
"""

from __future__ import annotations

import threading

from sqlalchemy.orm import Session

from evaluator import crud
from leaderboard import source
from leaderboard.ranking import Row


class KeptRows:
    """One database's rows as of ``version``, brought up to date on each :meth:`read`."""

    def __init__(self) -> None:
        self.version: int | None = None
        self._rows: dict[str, Row] = {}
        self._lock = threading.Lock()
        self.full_reads = 0
        self.changed_reads = 0

    def read(self, session: Session) -> list[Row]:
        """Every submission as a ranking row, as of the board version read now or later.

        Args:
            session: an open session on the database.

        Returns:
            The rows (a new list; the rows themselves are shared and frozen).
        """
        with self._lock:
            version, unmarked = crud.board_state(session)
            kept = self.version
            if kept is None or unmarked > kept or version < kept:
                self._rows = {row.id: row for row in source.load_rows(session)}
                self.full_reads += 1
            elif version > kept:
                for row in source.load_changed_rows(session, since=kept):
                    self._rows[row.id] = row
                self.changed_reads += 1
            self.version = version
            return list(self._rows.values())


_kept: dict[str, KeptRows] = {}
_kept_lock = threading.Lock()


def kept_rows(db_url: str) -> KeptRows:
    """The kept rows of the database at ``db_url`` (one per database and process)."""
    with _kept_lock:
        if db_url not in _kept:
            _kept[db_url] = KeptRows()
        return _kept[db_url]
