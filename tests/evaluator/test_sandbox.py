"""Issue 45: the sandbox a participant's recipe is re-run in, with real processes.

Every check runs the host's Python inside a real bubblewrap sandbox (the interpreter's
installation and the virtual environment bound read-only at their own paths) and looks at what
the sandboxed code could do and at how the run ended. Skipped where the sandbox's tools or root
are missing; where they are present, the sandbox must work.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

from evaluator.reproduction import sandbox
from evaluator.reproduction.sandbox import (
    Mount,
    SandboxLimits,
    SandboxResult,
    run_sandboxed,
    sandbox_unavailable,
)

pytestmark = pytest.mark.skipif(
    sandbox._tools_missing() is not None, reason=str(sandbox._tools_missing())
)

PYTHON_MOUNTS = tuple(
    Mount(Path(prefix), prefix) for prefix in dict.fromkeys([sys.base_prefix, sys.prefix])
)
MiB = 2**20


def run_py(code: str, scratch: Path, *, mounts: tuple[Mount, ...] = (), **limits) -> SandboxResult:
    """Run ``code`` with the host's Python in the sandbox."""
    scratch.mkdir(exist_ok=True)
    return run_sandboxed(
        [sys.executable, "-c", code],
        scratch=scratch,
        mounts=PYTHON_MOUNTS + mounts,
        limits=SandboxLimits(**limits),
    )


def outcome(code: str) -> str:
    """Code that runs ``code`` and prints ``ok`` or the name of the exception it raised."""
    body = "\n".join("    " + line for line in code.splitlines())
    return f"try:\n{body}\n    print('ok')\nexcept Exception as exc:\n    print(type(exc).__name__)"


def processes_running(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker``."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found


def test_sandbox_is_available_here() -> None:
    assert sandbox_unavailable() is None


def test_a_command_runs_and_its_scratch_files_come_back(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "input.txt").write_text("from the caller")
    outside = tmp_path / "owned-by-1234"
    outside.write_text("not yours")
    os.chown(outside, 1234, 1234)
    code = (
        "import os\n"
        "print(os.getuid(), os.getgid(), os.getcwd(), open('input.txt').read())\n"
        "os.makedirs('/scratch/out/deep')\n"
        "open('/scratch/out/deep/result.txt', 'w').write('written inside')\n"
        f"os.symlink({str(outside)!r}, '/scratch/out/link')\n"
    )
    result = run_py(code, scratch)
    assert (result.returncode, result.stopped) == (0, None), result.stderr
    assert result.stdout == "65534 65534 /scratch from the caller\n"
    written = scratch / "out" / "deep" / "result.txt"
    assert written.read_text() == "written inside"
    for path in (scratch, written, scratch / "out", scratch / "input.txt"):
        assert (path.stat().st_uid, path.stat().st_gid) == (os.getuid(), os.getgid())
    assert (outside.stat().st_uid, outside.stat().st_gid) == (1234, 1234)
    assert os.readlink(scratch / "out" / "link") == str(outside)


def test_no_network_not_even_the_hosts_postgres(tmp_path: Path) -> None:
    code = "\n".join(
        outcome(f"socket.create_connection({address!r}, timeout=3).close()")
        for address in (("127.0.0.1", 5432), ("1.1.1.1", 53), ("8.8.8.8", 443))
    )
    code += "\n" + outcome(
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'q', ('8.8.8.8', 53))"
    )
    code += "\n" + outcome("socket.getaddrinfo('example.org', 443)")
    result = run_py("import socket\n" + code, tmp_path / "scratch")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ConnectionRefusedError"] + ["OSError"] * 3 + ["gaierror"]
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=3).close()
    except OSError:
        pytest.skip("PostgreSQL is not listening on the host's 127.0.0.1:5432")


def test_host_files_that_were_not_mounted_do_not_exist(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("DATABASE_URL=postgresql://evaluator:hunter2@db/scores")
    secret.chmod(0o644)
    code = "\n".join(
        outcome(f"open({path!r}).read()")
        for path in (str(secret), "/work/main/.git/HEAD", "/root/.bashrc", "/etc/shadow")
    )
    code += "\nimport os\nprint(sorted(os.listdir('/root')))"
    result = run_py(code, tmp_path / "scratch")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == ["FileNotFoundError"] * 4
    assert Path("/work/main/.git").exists() and Path("/root/.bashrc").exists()
    assert "hunter2" not in result.stdout
    assert lines[4] in ("[]", "['.pyenv']")


def test_writes_outside_scratch_and_tmp_fail(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o777)
    data.chmod(0o777)
    (data / "train.json").write_text("{}")
    (data / "train.json").chmod(0o666)
    targets = ["/data/new.txt", "/data/train.json", f"{sys.prefix}/x", "/usr/x", "/etc/x", "/x"]
    code = "\n".join(outcome(f"open({path!r}, 'a').write('x')") for path in targets)
    code += "\n" + outcome("open('/scratch/x', 'w').write('x')")
    code += "\n" + outcome("open('/tmp/x', 'w').write('x')")
    result = run_py(code, tmp_path / "scratch", mounts=(Mount(data, "/data"),))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["OSError", "OSError"], "the read-only mount is writable"
    assert set(lines[2:6]) <= {"PermissionError", "OSError"}, lines
    assert lines[6:] == ["ok", "ok"]
    assert [p.name for p in data.iterdir()] == ["train.json"]
    assert (data / "train.json").read_text() == "{}"


def test_a_read_only_mount_answers_erofs_or_eacces(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)
    code = "try:\n    open('/data/x', 'w')\nexcept OSError as exc:\n    print(exc.errno)"
    result = run_py(code, tmp_path / "scratch", mounts=(Mount(data, "/data"),))
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) in (errno.EROFS, errno.EACCES), result.stdout


def test_a_writable_mount_takes_writes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    result = run_py(
        "open('/out/x', 'w').write('y')",
        tmp_path / "scratch",
        mounts=(Mount(out, "/out", writable=True),),
    )
    assert result.returncode == 0, result.stderr
    assert (out / "x").read_text() == "y"


def test_a_fork_bomb_hits_the_process_limit_and_the_host_still_forks(tmp_path: Path) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    code = (
        f"import os, time  # {marker}\n"
        "while True:\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
    )
    result = run_py(code, tmp_path / "scratch", processes=32, wall_seconds=30)
    assert result.returncode is None
    assert result.stopped is not None and "the 32-process limit" in result.stopped, result
    assert result.seconds < 10
    assert processes_running(marker) == []
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7


def test_a_fork_bomb_that_ignores_failing_forks_is_stopped_naming_the_process_limit(
    tmp_path: Path,
) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    code = (
        f"import os, time  # {marker}\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.05)\n"
    )
    result = run_py(code, tmp_path / "scratch", processes=32, wall_seconds=1.5)
    assert result.returncode is None
    assert result.stopped is not None and "the 1.5 s wall-clock limit" in result.stopped, result
    assert "the 32-process limit" in result.stopped
    assert processes_running(marker) == []
    assert os.waitstatus_to_exitcode(os.system("true")) == 0


def test_a_memory_bomb_hits_the_memory_limit(tmp_path: Path) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 2**20))"
    result = run_py(code, tmp_path / "scratch", memory_bytes=512 * MiB)
    assert result.returncode is None
    assert result.stopped is not None and "the 512 MiB memory limit" in result.stopped, result


def test_an_endless_loop_hits_the_cpu_limit(tmp_path: Path) -> None:
    result = run_py("while True:\n    pass", tmp_path / "scratch", cpu_seconds=2)
    assert result.returncode is None
    assert result.stopped is not None and "2 s CPU-time limit" in result.stopped, result
    assert 1.5 < result.seconds < 10


def test_ignoring_sigxcpu_does_not_escape_the_cpu_limit(tmp_path: Path) -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    result = run_py(code, tmp_path / "scratch", cpu_seconds=1)
    assert result.returncode is None
    assert result.stopped is not None and "1 s CPU-time limit" in result.stopped, result
    assert result.seconds < 10


def test_a_sleeper_hits_the_wall_clock_and_its_whole_tree_is_killed(tmp_path: Path) -> None:
    marker = f"sleeper-{uuid.uuid4().hex}"
    code = f"import os, time  # {marker}\nos.fork()\ntime.sleep(60)"
    result = run_py(code, tmp_path / "scratch", wall_seconds=3)
    assert result.returncode is None
    assert result.stopped is not None and "the 3 s wall-clock limit" in result.stopped, result
    assert 2.9 < result.seconds < 10
    assert processes_running(marker) == []


def test_a_process_name_that_is_not_utf8_does_not_blind_the_watchdog(tmp_path: Path) -> None:
    code = (
        "import ctypes, time\n"
        "ctypes.CDLL(None).prctl(15, b'\\xff\\xfe) 1 2', 0, 0, 0)\n"
        "print(open('/proc/self/stat', 'rb').read()[:20], flush=True)\n"
        "time.sleep(60)"
    )
    result = run_py(code, tmp_path / "scratch", wall_seconds=1)
    assert "\\xff\\xfe) 1 2" in result.stdout, result
    assert result.stopped is not None and "the 1 s wall-clock limit" in result.stopped, result


def test_endless_writing_hits_the_disk_limit(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    code = (
        "chunk = b'x' * 2**20\n"
        "i = 0\n"
        "while True:\n"
        "    with open(f'/scratch/part-{i}', 'wb') as f:\n"
        "        f.write(chunk)\n"
        "    i += 1\n"
    )
    result = run_py(code, scratch, disk_bytes=100 * MiB, wall_seconds=30)
    assert result.returncode is None
    assert result.stopped is not None and "the 100 MiB disk limit" in result.stopped, result
    assert sandbox.disk_usage(scratch) > 100 * MiB
    assert all(p.stat().st_uid == os.getuid() for p in scratch.iterdir())


def test_one_huge_file_hits_the_disk_limit(tmp_path: Path) -> None:
    code = "open('/scratch/big', 'wb').write(b'x' * (200 * 2**20))"
    result = run_py(code, tmp_path / "scratch", disk_bytes=100 * MiB)
    assert result.stopped is not None and "the 100 MiB disk limit" in result.stopped, result
    assert (tmp_path / "scratch" / "big").stat().st_size <= 100 * MiB


def test_a_flood_of_empty_files_hits_the_disk_limit(tmp_path: Path) -> None:
    code = "i = 0\nwhile True:\n    open(f'/scratch/{i}', 'w').close()\n    i += 1"
    result = run_py(code, tmp_path / "scratch", disk_bytes=4 * MiB, wall_seconds=30)
    assert result.stopped is not None and "the 4 MiB disk limit" in result.stopped, result
    assert len(os.listdir(tmp_path / "scratch")) >= 4 * MiB // 4096


def test_nesting_past_the_longest_path_is_stopped_and_can_be_removed(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    code = "import os\nwhile True:\n    os.mkdir('d' * 250)\n    os.chdir('d' * 250)"
    try:
        result = run_py(code, scratch, disk_bytes=100 * MiB, wall_seconds=30)
        assert result.returncode is None
        assert result.stopped is not None and "could not be measured" in result.stopped, result
        assert "the 100 MiB disk limit" in result.stopped
        assert (scratch / ("d" * 250)).stat().st_uid == os.getuid()
    finally:
        sandbox.remove_tree(scratch)
    assert not scratch.exists()


def test_tmp_is_capped_too(tmp_path: Path) -> None:
    code = (
        "chunk = b'x' * 2**20\nfor i in range(50):\n    open(f'/tmp/part-{i}', 'wb').write(chunk)\n"
    )
    result = run_py(code, tmp_path / "scratch", disk_bytes=10 * MiB)
    assert result.stopped is not None and "the 10 MiB disk limit" in result.stopped, result


def test_the_callers_environment_does_not_leak_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PFL_SANDBOX_MARKER", "leaked")
    monkeypatch.setenv("DATABASE_URL", "postgresql://evaluator:secret@127.0.0.1/scores")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = run_sandboxed(
        [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        scratch=scratch,
        mounts=PYTHON_MOUNTS,
        env={"PFLKIT_SEED": "7"},
    )
    assert result.returncode == 0, result.stderr
    inside = json.loads(result.stdout)
    assert "PFL_SANDBOX_MARKER" not in inside and "DATABASE_URL" not in inside
    assert "leaked" not in result.stdout and "secret" not in result.stdout
    assert inside["PFLKIT_SEED"] == "7"
    assert inside["HOME"] == "/scratch" and inside["PATH"] == "/usr/bin:/bin"


def test_output_keeps_its_last_20000_characters(tmp_path: Path) -> None:
    code = "import sys\nsys.stdout.write('a' * 100000 + 'END')\nsys.stderr.write('b' * 50000)"
    result = run_py(code, tmp_path / "scratch")
    assert result.returncode == 0
    assert len(result.stdout) == 20_000 and result.stdout.endswith("aEND")
    assert result.stderr == "b" * 20_000


def test_a_failing_command_keeps_its_exit_code(tmp_path: Path) -> None:
    result = run_py("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)", tmp_path / "s")
    assert (result.returncode, result.stopped, result.stderr) == (3, None, "bye\n")


@pytest.mark.parametrize(
    "target", ["relative", "/", "/scratch/x", "/proc", "/tmp", "/usr/lib/x", "/a/../b"]
)
def test_mount_targets_that_would_shadow_the_sandbox_are_refused(
    tmp_path: Path, target: str
) -> None:
    with pytest.raises(ValueError):
        run_sandboxed(["true"], scratch=tmp_path, mounts=[Mount(tmp_path, target)])


def test_a_mount_under_tmp_lies_over_the_sandboxs_own_tmp(tmp_path: Path) -> None:
    """A checkout under /tmp (as a CI clone may be) is mounted where it lives; /tmp stays the
    sandbox's own, writable one."""
    kit = Path("/tmp") / f"sandbox-kit-{uuid.uuid4().hex}"
    kit.mkdir(mode=0o755)
    try:
        (kit / "module.txt").write_text("kit")
        (kit / "module.txt").chmod(0o644)
        code = (f"print(open({str(kit / 'module.txt')!r}).read())\n"
                "open('/tmp/own', 'w').write('x')\nprint(open('/tmp/own').read())")
        result = run_py(code, tmp_path / "scratch", mounts=(Mount(kit, str(kit)),))
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["kit", "x"]
        assert not (kit / "own").exists() and not Path("/tmp/own").exists()
    finally:
        (kit / "module.txt").unlink()
        kit.rmdir()
