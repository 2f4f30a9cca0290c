"""Run untrusted code (a participant's training recipe) in a locked-down process tree.

Threat model. The re-run of a recipe executes a participant's own Python files, so the code is
treated as hostile. The sandbox stops it from reading anything of the host it was not given
(the evaluator's checkout and database, other submissions, credentials in the environment or
under ``/root``), from writing anywhere but its scratch directory and a size-limited ``/tmp``,
from reaching any network (PostgreSQL and Redis on the host's loopback included), from
signalling or seeing host processes, and from exhausting the host: CPU time per process,
address space, file sizes, scratch total, the number of processes and wall-clock time are
capped, and everything it started is killed at the end. It does not stop a recipe from using
the whole budget it is given (an endless loop burns its CPU limit, a recipe may fill its disk
quota), from reading what was mounted for it (the Python installation, the kit, the data), nor
from exploiting a kernel vulnerability: namespaces and an unprivileged user are a strong fence,
not a virtual machine.

Limits (:class:`SandboxLimits`): CPU seconds per process (``RLIMIT_CPU``: SIGXCPU, then SIGKILL
a few seconds later; a recipe's processes each get the budget), wall-clock seconds for the whole
run, address space per process (``RLIMIT_AS``: virtual memory, so thread stacks and malloc arenas
count and a CUDA runtime would not start under it), disk (the largest file through
``RLIMIT_FSIZE``, the scratch directory's total through a watchdog, every entry counted as at
least 4 KiB; the ``/tmp`` tmpfs is capped at the same size), and processes (``RLIMIT_NPROC``,
which counts the threads of every process of uid 65534 on the host, so concurrent sandboxes
share it). A run stopped by a limit has ``returncode`` None and ``stopped`` naming the limit;
the limit is read from the exit (SIGXCPU, SIGXFSZ, SIGKILL) and the end of stderr
(``MemoryError``, ``BlockingIOError`` ...), so it is a best reading, not a proof.

Mechanisms, and why each:

* bubblewrap (``bwrap``), run as root, builds a new mount namespace whose root is an empty
  tmpfs holding only the system directories (read-only), a few ``/etc`` files, ``/proc``, a
  minimal ``/dev``, a tmpfs ``/tmp``, exactly the caller's mounts and the scratch directory at
  ``/scratch``: what is not mounted does not exist. New network, PID, IPC and UTS namespaces
  leave a loopback with nothing listening and hide host processes. No user namespace is made:
  a root-owned user namespace maps only uid 0, and the drop to ``nobody`` below needs the
  host's uids. ``--die-with-parent`` and the PID namespace tie every sandboxed process to the
  bwrap process, so killing that one process group kills them all.
* ``setpriv`` drops to uid/gid 65534 (``nobody``) with no supplementary groups, no
  capabilities (bounding set included) and ``no_new_privs`` before it execs the command, so
  file permissions apply and ``RLIMIT_NPROC`` binds (root ignores it).
* ``prlimit`` sets the rlimits inside the sandbox, after bwrap and before setpriv, so they
  bind the untrusted process tree only (bwrap's own processes are not limited) and no
  ``preexec_fn`` runs in the evaluator's possibly multithreaded process.
* A watchdog thread enforces the wall clock and polls the scratch directory's total size
  every 0.1 s to 0.5 s (the rlimits cannot see a total), killing the process group when either
  is exceeded; what is written between two polls can overshoot the disk limit. It also samples
  the tree's CPU times from ``/proc`` (bwrap passes no rusage on), to tell the CPU limit's
  SIGKILL from the OOM killer's.

The scratch directory is chowned to 65534 for the run and back to the evaluator's uid after
it, without following symlinks and with set-uid/set-gid bits cleared; delete it with
:func:`remove_tree` (the code may nest directories deeper than ``shutil.rmtree`` goes). Needs
root, ``bwrap``, ``setpriv`` and ``prlimit`` (:func:`sandbox_unavailable` says why not).
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

SANDBOX_UID = 65534
SANDBOX_GID = 65534
TAIL_CHARS = 20_000
# The watchdog polls the scratch size every 0.1 s to 0.5 s: ten times as long as a scan takes,
# so that a slow scan of a large tree costs at most a tenth of a core.
POLL_SECONDS = (0.1, 0.5)
# After SIGXCPU at the CPU limit, the kernel sends SIGKILL this many seconds later.
CPU_GRACE_SECONDS = 2
_TICKS = os.sysconf("SC_CLK_TCK")
# No user namespace: see the module's docstring.
NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
ETC_FILES = ("/etc/ld.so.cache", "/etc/nsswitch.conf", "/etc/localtime")
RESERVED_TARGETS = ("/scratch", "/proc", "/dev", "/tmp", "/etc", *SYSTEM_DIRS)
#: reserved directories a mount may sit inside (bound over the tmpfs, which is made first): a
#: kit or a virtual environment under /tmp (a CI checkout) is mounted where it lives
OVERLAID_TARGETS = ("/tmp",)
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/scratch", "USER": "nobody", "LOGNAME": "nobody"}
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_NPROC_MARKERS = ("BlockingIOError", "Resource temporarily unavailable", "can't start new thread")
_FSIZE_MARKERS = ("File too large", "No space left on device")


@dataclass(frozen=True)
class Mount:
    """A host path bound into the sandbox (read-only unless ``writable``)."""

    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class SandboxLimits:
    """What a sandboxed run may use; ``disk_bytes`` caps the scratch total and the largest
    file, ``processes`` the tasks (processes and threads) of the sandbox user."""

    cpu_seconds: int = 3600
    wall_seconds: float = 3600.0
    memory_bytes: int = 8 * 2**30
    disk_bytes: int = 4 * 2**30
    processes: int = 64


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended. ``returncode`` is None and ``stopped`` names the limit when a
    limit stopped it; a command killed by a signal of its own exits 128 + the signal."""

    returncode: int | None
    stopped: str | None
    stdout: str
    stderr: str
    seconds: float


def _size(n: float) -> str:
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor and n % factor == 0:
            return f"{int(n // factor)} {unit}"
    return f"{int(n)} bytes"


def _seconds(n: float) -> str:
    return f"{n:g} s"


def _reason(kind: str, limits: SandboxLimits) -> str:
    """A sentence naming the limit that stopped a run and its value."""
    return {
        "cpu": f"it used up its {_seconds(limits.cpu_seconds)} CPU-time limit",
        "wall": f"it ran past the {_seconds(limits.wall_seconds)} wall-clock limit",
        "memory": f"it ran out of the {_size(limits.memory_bytes)} memory limit",
        "disk": f"it wrote past the {_size(limits.disk_bytes)} disk limit",
        "unmeasurable": "its scratch directory could not be measured (nested too deep?) against"
        f" the {_size(limits.disk_bytes)} disk limit",
        "processes": f"it hit the {limits.processes}-process limit",
        "watchdog": "the sandbox's watchdog failed, so the run was stopped to be safe",
    }[kind]


def _stopped(kind: str | None, tasks_peak: int, limits: SandboxLimits) -> str | None:
    """The sentence for ``SandboxResult.stopped``; a run that filled its process limit and was
    then stopped by another limit (a fork bomb whose processes ignore the failing forks) says
    both."""
    if kind is None:
        return None
    if kind != "processes" and tasks_peak >= limits.processes:
        return f"{_reason(kind, limits)}, having hit the {limits.processes}-process limit"
    return _reason(kind, limits)


def _tool(name: str) -> str | None:
    """The tool's path if it lies under /usr (the only system tree bound into the sandbox)."""
    found = shutil.which(name, path="/usr/bin:/usr/sbin:/bin:/sbin")
    if found is None:
        return None
    real = os.path.realpath(found)
    return real if real.startswith("/usr/") else None


def _check_target(target: str) -> str:
    """``target`` if it is a normalised absolute path clear of the sandbox's own directories."""
    path = PurePosixPath(target)
    if target == "/" or not path.is_absolute() or ".." in path.parts or str(path) != target:
        raise ValueError(f"mount target {target!r} must be a normalised absolute path, not /")
    for reserved in RESERVED_TARGETS:
        inside = PurePosixPath(reserved) in path.parents and reserved not in OVERLAID_TARGETS
        if path == PurePosixPath(reserved) or inside:
            raise ValueError(f"mount target {target!r} lies on the sandbox's own {reserved}")
    return str(path)


def _system_args() -> list[str]:
    """Read-only system directories (kept as symlinks where the host's are) and /etc files."""
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_FILES:
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return args


def _mount_args(mounts: Sequence[Mount]) -> list[str]:
    """Binds for the caller's mounts, parents first, with world-traversable parent dirs."""
    args: list[str] = []
    made: set[PurePosixPath] = {PurePosixPath("/"), *map(PurePosixPath, OVERLAID_TARGETS)}
    bound: list[PurePosixPath] = []
    for mount in sorted(mounts, key=lambda m: len(PurePosixPath(_check_target(m.target)).parts)):
        target = PurePosixPath(mount.target)
        if not os.path.exists(mount.source):
            raise FileNotFoundError(f"mount source {mount.source} does not exist")
        for parent in reversed(target.parents):
            if parent in made or any(b == parent or b in parent.parents for b in bound):
                continue
            args += ["--perms", "0755", "--dir", str(parent)]
            made.add(parent)
        args += ["--bind" if mount.writable else "--ro-bind", str(mount.source), str(target)]
        bound.append(target)
    return args


def _prlimit_args(limits: SandboxLimits) -> list[str]:
    """The rlimits; the CPU hard limit (SIGKILL) lies a grace after the soft one (SIGXCPU)."""
    cpu = int(limits.cpu_seconds)
    return [
        f"--cpu={cpu}:{cpu + CPU_GRACE_SECONDS}",
        f"--as={limits.memory_bytes}",
        f"--fsize={limits.disk_bytes}",
        f"--nproc={limits.processes}",
        "--core=0",
    ]


def _setpriv_args(setpriv: str) -> list[str]:
    ids = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups"]
    return [setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def _command(
    argv: Sequence[str], scratch: Path, mounts: Sequence[Mount], limits: SandboxLimits, cwd: str
) -> list[str]:
    """The bwrap → prlimit → setpriv → argv command line."""
    bwrap, prlimit, setpriv = _tool("bwrap"), _tool("prlimit"), _tool("setpriv")
    if bwrap is None or prlimit is None or setpriv is None:
        raise RuntimeError(_tools_missing() or "bwrap, prlimit or setpriv is missing")
    tmp = ["--perms", "1777", "--size", str(limits.disk_bytes), "--tmpfs", "/tmp"]
    filesystem = [*_system_args(), "--proc", "/proc", "--dev", "/dev", *tmp, *_mount_args(mounts)]
    filesystem += ["--bind", str(scratch), "/scratch", "--chdir", cwd]
    sandbox = [bwrap, *NAMESPACES, "--die-with-parent", "--new-session", *filesystem, "--"]
    return [*sandbox, prlimit, *_prlimit_args(limits), *_setpriv_args(setpriv), *argv]


def _walk(root: Path, *, strict: bool) -> Iterator[os.DirEntry[str]]:
    """Every entry under ``root``, depth first without recursion, symlinks not followed.

    Entries that vanish meanwhile are skipped; a directory that cannot be read (its path grew
    too long to open, say) raises OSError when ``strict`` and is skipped otherwise."""
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    yield entry
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            if strict:
                raise


def disk_usage(root: Path) -> int:
    """Bytes under ``root``: each inode once, at the largest of its size, its blocks and one
    4 KiB block (so that a flood of empty files counts too). Raises OSError where a directory
    cannot be read, e.g. nested past the longest path the kernel opens."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for entry in _walk(root, strict=True):
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += max(info.st_size, info.st_blocks * 512, 4096)
    return total


def _proc_row(pid: str) -> tuple[int, float, int] | None:
    """A process's parent pid, CPU seconds (user + system) and threads from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name before ")" is the process's to choose: parse after its last ")".
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[17])


def tree_usage(root: int) -> tuple[float, int]:
    """The sandbox below the bwrap process ``root``: the largest CPU time (seconds) of any of
    its processes, and its tasks (threads) below bwrap's own init process."""
    table = {int(n): row for n in os.listdir("/proc") if n.isdigit() and (row := _proc_row(n))}
    children: defaultdict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _, _) in table.items():
        children[ppid].append(pid)
    peak, tasks, stack = 0.0, 0, [(root, 0)]
    while stack:
        parent, depth = stack.pop()
        for child in children.get(parent, ()):
            peak = max(peak, table[child][1])
            tasks += table[child][2] if depth else 0
            stack.append((child, depth + 1))
    return peak, tasks


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Chown ``root`` and all below it without following symlinks; clear set-id bits. Entries
    nested past the longest path the kernel opens are left as they are."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for entry in _walk(root, strict=False):
        try:
            os.chown(entry.path, uid, gid, follow_symlinks=False)
            mode = os.lstat(entry.path).st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(entry.path, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                raise


def remove_tree(path: Path) -> None:
    """Delete a scratch directory, however deep the sandboxed code nested it (shutil.rmtree
    recurses and gives up past about a thousand levels); symlinks are not followed."""
    rm = shutil.which("rm", path="/usr/bin:/bin") or "rm"
    subprocess.run([rm, "-rf", "--one-file-system", "--", str(path)], check=True)


class _Tail:
    """Reads a pipe to its end in a thread, keeping only its last characters."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._data = bytearray()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        keep = TAIL_CHARS * 4
        with self._pipe:
            while chunk := self._pipe.read1(65536):
                self._data += chunk
                if len(self._data) > 2 * keep:
                    del self._data[:-keep]

    def text(self, timeout: float) -> str:
        self._thread.join(timeout)
        return bytes(self._data).decode("utf-8", errors="replace")[-TAIL_CHARS:]


class _Watchdog:
    """Kills the sandbox's process group past the wall clock or the scratch disk limit."""

    def __init__(self, pid: int, scratch: Path, limits: SandboxLimits) -> None:
        self.pid, self.scratch, self.limits = pid, scratch, limits
        self.start = time.monotonic()
        self.reason: str | None = None
        # bwrap does not pass its children's rusage on, so CPU time is sampled from /proc.
        self.cpu_peak = 0.0
        self.tasks_peak = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        try:
            while not self._done.is_set() and not self._check():
                continue
        except Exception:
            self.kill("watchdog")
            raise

    def _check(self) -> bool:
        """One poll: kill past a limit (True), else wait for the next poll (False)."""
        remaining = self.limits.wall_seconds - (time.monotonic() - self.start)
        if remaining <= 0:
            self.kill("wall")
            return True
        began = time.monotonic()
        cpu, tasks = tree_usage(self.pid)
        self.cpu_peak, self.tasks_peak = max(self.cpu_peak, cpu), max(self.tasks_peak, tasks)
        try:
            too_much = disk_usage(self.scratch) > self.limits.disk_bytes
        except OSError:
            self.kill("unmeasurable")
            return True
        if too_much:
            self.kill("disk")
            return True
        shortest, longest = POLL_SECONDS
        scan = time.monotonic() - began
        self._done.wait(min(longest, max(shortest, 10 * scan), remaining))
        return False

    def kill(self, reason: str) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self.reason = self.reason or reason
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def finish(self) -> None:
        """Called once the process has exited but before it is reaped (its pid stays ours)."""
        with self._lock:
            self._done.set()
        self._thread.join()


def _classify(status: int, cpu_peak: float, stderr: str, limits: SandboxLimits) -> str | None:
    """Which limit stopped a run that ended by itself, as well as its status and output tell."""
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    signum = code - 128 if code > 128 else -code if code < 0 else 0
    tail = stderr[-4000:]
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_peak >= limits.cpu_seconds):
        return "cpu"
    if signum == signal.SIGXFSZ or any(m in tail for m in _FSIZE_MARKERS):
        return "disk"
    if any(m in tail for m in _MEMORY_MARKERS):
        return "memory"
    if any(m in tail for m in _NPROC_MARKERS):
        return "processes"
    # The watchdog's kills are told apart before; another SIGKILL is the kernel's OOM killer.
    return "memory" if signum == signal.SIGKILL else None


def _clean_env(env: Mapping[str, str] | None) -> dict[str, str]:
    merged = dict(BASE_ENV)
    merged.update(env or {})
    return merged


def _spawn(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], _Tail, _Tail]:
    """Start the command in a new session with no inherited file descriptors (no preexec_fn,
    so safe in a multithreaded evaluator); stdin is /dev/null."""
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    return proc, _Tail(proc.stdout), _Tail(proc.stderr)


def _wait(pid: int, watchdog: _Watchdog) -> int:
    """Wait for the exit, stop the watchdog, then reap (so that the watchdog never signals a
    reused pid): the wait status. Interrupted, it kills the sandbox before it raises."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except BaseException:
        watchdog.finish()
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    watchdog.finish()
    return os.waitpid(pid, 0)[1]


def run_sandboxed(
    argv: list[str],
    *,
    scratch: Path,
    mounts: Sequence[Mount] = (),
    limits: SandboxLimits = SandboxLimits(),
    env: Mapping[str, str] | None = None,
    cwd: str = "/scratch",
) -> SandboxResult:
    """Run ``argv`` in the sandbox with ``scratch`` (an existing directory, made by the caller)
    read-write at ``/scratch`` and ``mounts`` bound in; the environment is ``PATH``, ``HOME``
    (``/scratch``), ``USER``/``LOGNAME`` (``nobody``) and ``env``, nothing of the caller's."""
    if not argv:
        raise ValueError("argv is empty")
    scratch = Path(scratch)
    if scratch.is_symlink() or not scratch.is_dir():
        raise NotADirectoryError(f"scratch {scratch} must be an existing directory")
    command = _command(argv, scratch.resolve(), mounts, limits, cwd)
    _chown_tree(scratch, SANDBOX_UID, SANDBOX_GID)
    start = time.monotonic()
    try:
        proc, out, err = _spawn(command, _clean_env(env))
        watchdog = _Watchdog(proc.pid, scratch, limits)
        status = _wait(proc.pid, watchdog)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        stdout, stderr = out.text(timeout=5), err.text(timeout=5)
    finally:
        _chown_tree(scratch, os.getuid(), os.getgid())
    kind = watchdog.reason or _classify(status, watchdog.cpu_peak, stderr, limits)
    return SandboxResult(
        returncode=None if kind else os.waitstatus_to_exitcode(status),
        stopped=_stopped(kind, watchdog.tasks_peak, limits),
        stdout=stdout,
        stderr=stderr,
        seconds=seconds,
    )


def _tools_missing() -> str | None:
    if os.geteuid() != 0:
        return "the sandbox needs root (bwrap mounts without a user namespace, setpriv drops uids)"
    for name in ("bwrap", "setpriv", "prlimit"):
        if _tool(name) is None:
            return f"{name} is not installed under /usr (apt-get install bubblewrap util-linux)"
    return None


@functools.cache
def sandbox_unavailable() -> str | None:
    """None when the sandbox works here (``true`` was run in one); otherwise why not."""
    missing = _tools_missing()
    if missing:
        return missing
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as tmp:
        limits = SandboxLimits(
            cpu_seconds=10, wall_seconds=30.0, memory_bytes=2**30, disk_bytes=2**20, processes=16
        )
        try:
            result = run_sandboxed(["true"], scratch=Path(tmp), limits=limits)
        except OSError as exc:
            return f"the sandbox could not start: {exc}"
    if result.returncode != 0:
        detail = result.stderr.strip() or result.stopped or f"exit {result.returncode}"
        return f"running true in the sandbox failed: {detail}"
    return None


__all__ = [
    "Mount",
    "SandboxLimits",
    "SandboxResult",
    "disk_usage",
    "remove_tree",
    "tree_usage",
    "run_sandboxed",
    "sandbox_unavailable",
]
