"""Backups that restore: a consistent copy of the database and the stored submissions, taken
while uploads and scoring go on (``pflkit evaluator backup DEST``), and its restoration into an
empty service (``pflkit evaluator restore SRC``).

A backup directory holds ``manifest.json`` (what was copied and what the database held at the
snapshot: migration, board version, teams, submissions), the database (``database.sqlite``,
made by SQLite's online backup API, or ``database.dump``, ``pg_dump``'s custom format) and
``storage/submissions/<id>/`` for every submission of the snapshot.

Consistency: the database is copied inside one read snapshot (a SQLite read transaction in WAL
mode, which the backup API copies; a PostgreSQL ``REPEATABLE READ`` transaction whose snapshot
``pg_dump --snapshot`` shares), and the submissions' files are copied after it: a submission
reaches ``queued`` only once its files are committed (``evaluator.storage``), so every
submission of the snapshot past ``received`` has its files; uploads that arrive later are left
out. The backup is written to ``DEST.partial-<pid>`` and renamed to ``DEST`` when complete.

What is not copied: the task queue (the reaper re-sends queued submissions after a restore),
uploads in flight (``incoming/``: their ``received`` rows are failed by the reaper after
``received_timeout_seconds``) and the workers' registry (cleared on restore).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from evaluator.core.config import Settings
from evaluator.core.db import get_engine, migrate
from evaluator.tables import BoardVersion, Submission, Team, Worker

MANIFEST = "manifest.json"
SQLITE_FILE = "database.sqlite"
PG_FILE = "database.dump"
FORMAT = 1
#: a callable run inside the backup's snapshot (tests compute the leaderboard there)
SnapshotReader = Callable[[Session], Any]


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message says why and what to do."""


@dataclass(frozen=True)
class Snapshot:
    """What the database held at the backup's snapshot."""

    revision: str | None
    board_version: int
    teams: int
    submissions: int
    submission_ids: list[str]


def _read_snapshot(session: Session) -> Snapshot:
    revision = session.execute(text("SELECT version_num FROM alembic_version")).scalar()
    version = session.scalar(select(BoardVersion.version).where(BoardVersion.id == 1))
    ids = list(session.scalars(select(Submission.id).order_by(Submission.id)))
    return Snapshot(
        revision=revision,
        board_version=int(version or 0),
        teams=int(session.scalar(select(func.count()).select_from(Team)) or 0),
        submissions=len(ids),
        submission_ids=ids,
    )


def _kind(url: str) -> str:
    if url.startswith("sqlite"):
        return "sqlite"
    if url.startswith("postgresql"):
        return "postgresql"
    raise BackupError(f"cannot back up a database at {make_url(url).drivername} URLs")


def _sqlite_path(url: str) -> Path:
    path = url.split(":///", 1)[-1]
    if not path:
        raise BackupError("the SQLite URL names no file")
    return Path(path)


def _pg_environment(url: str) -> dict[str, str]:
    """libpq's variables for ``url`` (the password stays out of the command line)."""
    parsed = make_url(url)
    env = {**os.environ}
    for variable, value in (("PGHOST", parsed.host), ("PGPORT", parsed.port),
                            ("PGUSER", parsed.username), ("PGPASSWORD", parsed.password),
                            ("PGDATABASE", parsed.database)):  # fmt: skip
        if value is not None:
            env[variable] = str(value)
    return env


def _pg_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackupError(
            f"{name} is not installed: install PostgreSQL's client tools at the server's major "
            "version (Debian/Ubuntu: apt-get install postgresql-client)"
        )
    return path


def _run(command: list[str], env: dict[str, str], what: str) -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BackupError(f"{what} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")


@contextmanager
def _sqlite_snapshot(url: str) -> Iterator[tuple[sqlite3.Connection, Session]]:
    """A read transaction on the SQLite file and a session that reads inside it."""
    source = sqlite3.connect(_sqlite_path(url), isolation_level=None, timeout=30)
    try:
        # The pool must not roll back (end the snapshot) when the session returns the connection.
        engine = create_engine("sqlite://", creator=lambda: source, poolclass=StaticPool,
                               pool_reset_on_return=None)  # fmt: skip
        # SQLAlchemy's first connection initialises the dialect and then rolls back: before BEGIN.
        engine.connect().close()
        source.execute("BEGIN")
        with Session(engine) as session:
            yield source, session
        engine.dispose(close=False)
    finally:
        if source.in_transaction:
            source.execute("ROLLBACK")
        source.close()


def _backup_sqlite(url: str, staging: Path, reader: SnapshotReader | None) -> tuple[Snapshot, Any]:
    with _sqlite_snapshot(url) as (source, session):
        snapshot = _read_snapshot(session)
        target = sqlite3.connect(staging / SQLITE_FILE)
        try:
            source.backup(target)  # the pages this connection's snapshot sees
        finally:
            target.close()
        _check_held(session, snapshot)
        seen = reader(session) if reader is not None else None
    copy = sqlite3.connect(staging / SQLITE_FILE)
    try:
        copied = copy.execute("SELECT count(*) FROM submissions").fetchone()[0]
    finally:
        copy.close()
    if copied != snapshot.submissions:
        raise BackupError(
            f"the copy holds {copied} submissions, the snapshot {snapshot.submissions}"
        )
    return snapshot, seen


def _check_held(session: Session, snapshot: Snapshot) -> None:
    """Raise unless the session still reads the snapshot it started with (nothing moved)."""
    if _read_snapshot(session) != snapshot:
        raise BackupError("the database changed under the backup's snapshot; nothing was kept")


def _backup_postgresql(
    url: str, staging: Path, reader: SnapshotReader | None
) -> tuple[Snapshot, Any]:
    pg_dump = _pg_tool("pg_dump")
    with get_engine(url).connect() as connection:
        connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            token = connection.execute(text("SELECT pg_export_snapshot()")).scalar_one()
            with Session(bind=connection) as session:
                snapshot = _read_snapshot(session)
                _run([pg_dump, "--format=custom", "--no-owner", "--no-privileges",
                      f"--snapshot={token}", f"--file={staging / PG_FILE}"],
                     _pg_environment(url), "pg_dump")  # fmt: skip
                _check_held(session, snapshot)
                seen = reader(session) if reader is not None else None
    return snapshot, seen


def _copy_storage(storage_dir: Path, target: Path, submission_ids: list[str]) -> int:
    """Copy the stored files of the snapshot's submissions; returns the bytes copied."""
    copied = 0
    for submission_id in submission_ids:
        source = Path(storage_dir) / "submissions" / submission_id
        if not source.is_dir():  # an upload still arriving at the snapshot: no files yet
            continue
        shutil.copytree(source, target / "submissions" / submission_id)
        copied += sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    readiness = Path(storage_dir) / "readiness.json"
    if readiness.is_file():
        shutil.copy2(readiness, target / "readiness.json")
    return copied


def backup(settings: Settings, destination: Path, *, reader: SnapshotReader | None = None) -> dict:
    """Copy the database and the stored submissions to ``destination`` (a new directory).

    Args:
        settings: the service's settings (database and storage).
        destination: where to write; must not exist, or be an empty directory.
        reader: run with a session inside the database's snapshot (its result is returned as
            ``manifest["reader"]``, not written).

    Returns:
        The manifest.

    Raises:
        BackupError: the destination is not empty, a PostgreSQL tool is missing or failed.
    """
    destination = Path(destination)
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise BackupError(f"{destination} exists and is not empty: choose a new directory")
    kind = _kind(settings.db_url)
    staging = destination.with_name(f"{destination.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "storage" / "submissions").mkdir(parents=True)
    started = dt.datetime.now(dt.UTC)
    try:
        take = _backup_sqlite if kind == "sqlite" else _backup_postgresql
        snapshot, seen = take(settings.db_url, staging, reader)
        stored_bytes = _copy_storage(settings.storage_dir, staging / "storage",
                                     snapshot.submission_ids)  # fmt: skip
        manifest = {
            "format": FORMAT, "database": kind,
            "database_file": SQLITE_FILE if kind == "sqlite" else PG_FILE,
            "started_at": started.isoformat(timespec="seconds"),
            "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "migration": snapshot.revision, "board_version": snapshot.board_version,
            "teams": snapshot.teams, "submissions": snapshot.submissions,
            "stored_bytes": stored_bytes,
        }  # fmt: skip
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        if destination.exists():
            destination.rmdir()
        os.replace(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {**manifest, "reader": seen}


def read_manifest(source: Path) -> dict:
    """The manifest of a backup directory.

    Raises:
        BackupError: not a complete backup of this format.
    """
    try:
        manifest = json.loads((Path(source) / MANIFEST).read_text())
    except (OSError, ValueError):
        raise BackupError(f"{source} is not a backup (no readable {MANIFEST})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{source}: unknown backup format {manifest.get('format')!r}")
    database = Path(source) / str(manifest.get("database_file"))
    if manifest.get("database") not in ("sqlite", "postgresql") or not database.is_file():
        raise BackupError(f"{source}: the database file named by {MANIFEST} is missing")
    return manifest


def _database_in_use(url: str) -> str | None:
    """Why the target database is not empty, or None."""
    engine = get_engine(url)
    try:
        with Session(engine) as session:
            teams = (
                session.scalar(
                    select(func.count()).select_from(Team).where(Team.is_organiser.is_(False))
                )
                or 0
            )
            submissions = session.scalar(select(func.count()).select_from(Submission)) or 0
    except Exception:
        return None  # no tables yet: empty
    if teams or submissions:
        return f"the database holds {teams} participant teams and {submissions} submissions"
    return None


def _storage_in_use(storage_dir: Path) -> str | None:
    submissions = Path(storage_dir) / "submissions"
    if submissions.is_dir() and any(submissions.iterdir()):
        return f"{submissions} holds stored submissions"
    return None


def _restore_sqlite(url: str, source: Path) -> None:
    target = _sqlite_path(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    get_engine(url).dispose()
    staging = target.with_name(f".{target.name}.restoring-{os.getpid()}")
    staging.unlink(missing_ok=True)
    reader, writer = sqlite3.connect(source), sqlite3.connect(staging)
    try:
        reader.backup(writer)
    finally:
        reader.close()
        writer.close()
    # A write-ahead log of the replaced database would be replayed onto the restored one.
    for suffix in ("-wal", "-shm"):
        target.with_name(target.name + suffix).unlink(missing_ok=True)
    os.replace(staging, target)


def _restore_postgresql(url: str, source: Path) -> None:
    pg_restore = _pg_tool("pg_restore")
    get_engine(url).dispose()
    _run([pg_restore, "--clean", "--if-exists", "--no-owner", "--no-privileges",
          "--single-transaction", "--exit-on-error", f"--dbname={make_url(url).database}",
          str(source)], _pg_environment(url), "pg_restore")  # fmt: skip


def _restore_storage(storage_dir: Path, source: Path) -> None:
    """Put the backup's submissions in place of the storage's (one rename each way)."""
    storage_dir = Path(storage_dir)
    storage_dir.mkdir(parents=True, exist_ok=True)
    staging = storage_dir / f".restoring-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source / "submissions", staging)
    current = storage_dir / "submissions"
    retired = storage_dir / f".replaced-{os.getpid()}"
    if current.exists():
        os.replace(current, retired)
    os.replace(staging, current)
    shutil.rmtree(retired, ignore_errors=True)
    shutil.rmtree(storage_dir / "incoming", ignore_errors=True)
    (storage_dir / "incoming").mkdir()
    if (source / "readiness.json").is_file():
        shutil.copy2(source / "readiness.json", storage_dir / "readiness.json")


def restore(settings: Settings, source: Path, *, force: bool = False) -> dict:
    """Restore a backup into the service's database and storage (the service stopped).

    Args:
        settings: the target service's settings (database and storage).
        source: a directory written by :func:`backup`.
        force: replace a database or storage that holds data.

    Returns:
        The backup's manifest.

    Raises:
        BackupError: the backup is incomplete, of another database kind, or the target holds
            data and ``force`` is not set.
    """
    source = Path(source)
    manifest = read_manifest(source)
    kind = _kind(settings.db_url)
    if manifest["database"] != kind:
        raise BackupError(
            f"the backup is of a {manifest['database']} database and the target is {kind}: "
            "restore it into the same kind of database"
        )
    if not force:
        problems = [p for p in (_database_in_use(settings.db_url),
                                _storage_in_use(settings.storage_dir)) if p]  # fmt: skip
        if problems:
            raise BackupError(
                f"the target is not empty ({'; '.join(problems)}): restore into an empty "
                "database and storage, or pass --force to replace them"
            )
    database = source / manifest["database_file"]
    (_restore_sqlite if kind == "sqlite" else _restore_postgresql)(settings.db_url, database)
    migrate(settings.db_url)  # a backup of an older kit is brought to this code's schema
    with Session(get_engine(settings.db_url)) as session, session.begin():
        session.execute(delete(Worker))  # the registry describes processes, not data
    _restore_storage(settings.storage_dir, source / "storage")
    return manifest
