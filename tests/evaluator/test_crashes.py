"""Issue 46: what each crash does, with real processes.

- The API killed (SIGKILL) mid-upload: nothing of the upload is stored as a submission, the
  reaper fails the row it left, and the client's retry to the restarted API succeeds.
- The database restarted under load (a PostgreSQL server of the test's own, stopped at once
  and started again while clients read and upload): requests during the outage are answered
  503 with ``Retry-After``, never 500 nor a dropped connection, and the same API process
  answers 200 again once the server is back.
- The disk full during an upload (the storage on a small tmpfs): 507, nothing half-written,
  the quota unchanged, and the retry succeeds once space is freed.

(The worker killed mid-scoring is ``test_e2e.py::test_worker_killed_mid_scoring_finishes_once``.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evaluator import client, crud
from evaluator.core.config import Settings
from evaluator.core.db import get_engine, session_scope
from evaluator.queue import TaskQueue
from evaluator.storage import SubmissionStore
from evaluator.worker import reap
from tests.evaluator.conftest import free_port
from tests.evaluator.factories import details_log, fedavg_log, metadata
from tests.evaluator.service import Service, create_team, service_env

MIB = 1024 * 1024


def _multipart(model: bytes) -> tuple[bytes, str]:
    """A valid upload's body and its Content-Type, encoded by httpx."""
    import json

    request = httpx.Request(
        "POST", "http://127.0.0.1/", files={
            "model": ("model.safetensors", model, "application/octet-stream"),
            "communication_log": ("communication_log.csv", fedavg_log(), "text/csv"),
            "communication_details": ("communication_log.jsonl", details_log(fedavg_log()),
                                      "application/jsonl"),
            "metadata": ("submission.json", json.dumps(metadata()), "application/json"),
        },
    )  # fmt: skip
    return request.read(), request.headers["content-type"]


def _changed(model: bytes, seed: int) -> bytes:
    """A distinct checkpoint (one tensor shifted by ``seed``)."""
    from safetensors.numpy import load, save

    tensors = load(model)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + float(seed)
    return save(tensors)


def _post(url: str, token: str, body: bytes, content_type: str) -> httpx.Response:
    return httpx.post(f"{url}/api/v1/submissions", content=body, timeout=120,
                      headers={"Authorization": f"Bearer {token}",
                               "Content-Type": content_type})  # fmt: skip


def _settings(env: dict[str, str]) -> Settings:
    return Settings(**{k.removeprefix("PFLKIT_EVALUATOR_").lower(): v for k, v in env.items()
                       if k.startswith("PFLKIT_EVALUATOR_")})  # fmt: skip


def _empty(tmp_path: Path) -> Path:
    """An empty benchmark directory: the API alone does not score."""
    (tmp_path / "no-data").mkdir(exist_ok=True)
    return tmp_path / "no-data"


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []


def test_the_api_killed_mid_upload_keeps_nothing_and_the_retry_succeeds(
    tmp_path: Path, tiny_reference: Path
) -> None:
    database_url = f"sqlite:///{tmp_path / 'evaluator.db'}"
    env = service_env(tmp_path, reference=tiny_reference, data=_empty(tmp_path),
                      database_url=database_url)  # fmt: skip
    token = create_team(database_url, "alpha")
    body, content_type = _multipart((tiny_reference / "model.safetensors").read_bytes())
    half = len(body) // 2
    storage = tmp_path / "storage"
    service = Service(tmp_path / "serve.log", env, "--no-worker")
    outcome: dict[str, object] = {}
    try:
        service.wait_healthy()
        sent_half, killed = threading.Event(), threading.Event()

        def stream() -> Iterator[bytes]:
            yield body[:half]
            sent_half.set()
            killed.wait(60)  # the server is killed meanwhile
            yield body[half:]

        def client() -> None:
            try:
                outcome["answer"] = _post(service.url, token, stream(), content_type)  # type: ignore[arg-type]
            except httpx.HTTPError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=client, daemon=True)
        thread.start()
        assert sent_half.wait(30)
        deadline = time.monotonic() + 30  # the server has written part of the upload
        while sum(p.stat().st_size for p in _files(storage / "incoming")) < MIB:
            assert time.monotonic() < deadline, service.output()
            time.sleep(0.05)
        service.kill()
        killed.set()
        thread.join(timeout=90)
        assert "error" in outcome, outcome  # the client saw the connection drop, no answer
        assert _files(storage / "submissions") == []
        with session_scope(database_url) as session:
            (row,) = crud.list_submissions(session, team_id=None, limit=10, offset=0)
            killed = row.id
            assert row.status == "received"  # never queued: no worker will see it

        service = Service(tmp_path / "serve2.log", env, "--no-worker")
        service.wait_healthy()
        retry = _post(service.url, token, body, content_type)
        assert retry.status_code == 202, retry.text
        retried = retry.json()["id"]
        assert retried != killed

        # The reaper (run by every worker) fails the row the killed upload left, and removes
        # its partial files.
        settings = _settings({**env, "PFLKIT_EVALUATOR_RECEIVED_TIMEOUT_SECONDS": "0.001"})
        queue = TaskQueue(settings.queue, name=settings.queue_name)
        counts = reap(settings, queue, SubmissionStore(settings.storage_dir))
        assert counts["failed"] == 1
        assert _files(storage / "incoming") == []
        listing = httpx.get(f"{service.url}/api/v1/submissions",
                            headers={"Authorization": f"Bearer {token}"}).json()  # fmt: skip
        states = {s["id"]: (s["status"], s["reason"]) for s in listing["submissions"]}
        assert states == {killed: ("failed", "the upload did not complete"),
                          retried: ("queued", None)}  # fmt: skip
        assert sorted(p.name for p in (storage / "submissions").iterdir()) == [retried]
    finally:
        service.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs (mounting needs root; the test is skipped without it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}): needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_during_an_upload_answers_507_and_keeps_nothing(
    tmp_path: Path, tiny_reference: Path, small_disk: Path
) -> None:
    storage = small_disk / "storage"
    database_url = f"sqlite:///{storage / 'evaluator.db'}"  # the default layout: on that disk
    env = service_env(tmp_path, reference=tiny_reference, data=_empty(tmp_path),
                      database_url=database_url)  # fmt: skip
    env["PFLKIT_EVALUATOR_STORAGE_DIR"] = str(storage)
    token = create_team(database_url, "alpha")
    model = (tiny_reference / "model.safetensors").read_bytes()
    assert len(model) > 24 * MIB
    body, content_type = _multipart(model)
    filler = small_disk / "other-data"
    filler.write_bytes(b"\0" * (24 * MIB))  # the checkpoint no longer fits
    service = Service(tmp_path / "serve.log", env, "--no-worker")
    try:
        service.wait_healthy()
        used_before = shutil.disk_usage(small_disk).used
        full = _post(service.url, token, body, content_type)
        assert full.status_code == 507, full.text
        assert full.json()["detail"].startswith("the evaluator's storage is full: nothing of this "
                                                "upload was kept and your quota is unchanged")  # fmt: skip
        assert full.headers["retry-after"] == "600"
        assert _files(storage / "incoming") == [] and _files(storage / "submissions") == []
        assert shutil.disk_usage(small_disk).used <= used_before + MIB
        with session_scope(database_url) as session:
            assert crud.list_submissions(session, team_id=None, limit=10, offset=0) == []
        assert "the storage is full: upload" in service.output()

        filler.unlink()  # the organisers free space
        retry = _post(service.url, token, body, content_type)
        assert retry.status_code == 202, retry.text
        stored = storage / "submissions" / retry.json()["id"] / "model.safetensors"
        assert stored.read_bytes() == model
    finally:
        service.stop()
        get_engine(database_url).dispose()


class PrivatePostgres:
    """A PostgreSQL server of this test's own on a free port (``initdb``, ``pg_ctl``), so that
    restarting it disturbs nothing else; as the ``postgres`` user when run as root."""

    def __init__(self) -> None:
        config = shutil.which("pg_config")
        bindir = (subprocess.run([config, "--bindir"], capture_output=True, text=True,
                                 check=False).stdout.strip() if config else "")  # fmt: skip
        if not bindir or not Path(bindir, "initdb").exists():
            pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        self.bin = Path(bindir)
        self.root = Path(tempfile.mkdtemp(prefix="pflkit-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.user = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
        if self.user:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync")  # fmt: skip
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run([*self.user, str(self.bin / tool), *args], capture_output=True,
                                text=True, check=False, timeout=120)  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=60")  # fmt: skip
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
                  "-w", "start")  # fmt: skip

    def crash(self) -> None:
        """Stop at once: every connection is cut, as in a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")

    def remove(self) -> None:
        subprocess.run([*self.user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                        "immediate", "stop"], capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.mark.postgres
def test_the_database_restarted_under_load_fails_requests_cleanly_and_recovers(
    tmp_path: Path, tiny_reference: Path
) -> None:
    server = PrivatePostgres()
    service = None
    try:
        server.start()
        env = service_env(tmp_path, reference=tiny_reference, data=_empty(tmp_path),
                          database_url=server.url)  # fmt: skip
        env["PFLKIT_EVALUATOR_API_THREADS"] = "8"
        env["PFLKIT_EVALUATOR_DAILY_QUOTA"] = "10000"
        token = create_team(server.url, "alpha")
        service = Service(tmp_path / "serve.log", env, "--no-worker")
        service.wait_healthy()
        pid = service.process.pid
        model = (tiny_reference / "model.safetensors").read_bytes()
        body, content_type = _multipart(model)
        first = _post(service.url, token, body, content_type)
        assert first.status_code == 202, first.text
        status_url = f"{service.url}/api/v1/submissions/{first.json()['id']}"
        answers: list[tuple[float, str, int]] = []
        stopped = threading.Event()

        def reader() -> None:
            with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
                while not stopped.is_set():
                    try:
                        code = c.get(status_url).status_code
                    except httpx.HTTPError as exc:
                        code = -1
                        answers.append((time.monotonic(), f"read {type(exc).__name__}", code))
                        continue
                    answers.append((time.monotonic(), "read", code))
                    time.sleep(0.01)

        def uploader() -> None:
            seed = 0
            while not stopped.is_set():
                seed += 1
                changed, kind = _multipart(_changed(model, seed))  # not a copy: never a 409
                try:
                    code = _post(service.url, token, changed, kind).status_code
                except httpx.HTTPError as exc:
                    answers.append((time.monotonic(), f"upload {type(exc).__name__}", -1))
                    continue
                answers.append((time.monotonic(), "upload", code))

        waited: list[str] = []

        def waiter() -> None:  # `pflkit submit --wait` rides the outage out (Retry-After)
            try:
                client.wait(first.json()["id"], server=service.url, token=token, timeout=6.0,
                            interval=0.2)  # fmt: skip
            except client.SubmitError as exc:
                waited.append(str(exc))

        threads = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
        threads += [threading.Thread(target=uploader, daemon=True),
                    threading.Thread(target=waiter, daemon=True)]  # fmt: skip
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        down = time.monotonic()
        server.crash()
        time.sleep(2.0)  # requests meet a server that is down
        server.start()
        up = time.monotonic()
        time.sleep(4.0)
        stopped.set()
        for thread in threads:
            thread.join(timeout=120)
        codes = {(kind, code) for _, kind, code in answers}
        assert codes <= {("read", 200), ("read", 503), ("upload", 202), ("upload", 503)}, sorted(
            codes
        )
        during = [code for at, kind, code in answers if down < at < up and kind == "read"]
        assert 503 in during  # the outage was met, and answered cleanly
        late = [code for at, kind, code in answers if at > up + 2.0 and kind == "read"]
        assert late and set(late) == {200}, late  # recovered, without a restart of its own
        assert service.process.poll() is None and service.process.pid == pid
        assert len(waited) == 1 and waited[0].startswith(
            f"submission {first.json()['id']} still queued after 6 s"
        ), waited
        assert httpx.get(f"{service.url}/healthz").status_code == 200
        print(f"{len(answers)} requests: " + ", ".join(
            f"{kind} {code}: {sum(1 for _, k, c in answers if (k, c) == (kind, code))}"
            for kind, code in sorted(codes)))  # fmt: skip

        # Nothing half-written: every queued submission has its files, and no stored
        # directory lacks its row.
        storage = tmp_path / "storage"
        with session_scope(server.url) as session:
            rows = crud.list_submissions(session, team_id=None, limit=10_000, offset=0)
        queued = {r.id for r in rows if r.status == "queued"}
        stored = {p.name for p in (storage / "submissions").iterdir()}
        assert queued == stored
    finally:
        if service is not None:
            service.stop()
        get_engine(server.url).dispose()
        server.remove()
