"""A SuperLink and SuperNodes on this machine, as separate processes (tests and measurements).

Each process is started by ``pflkit flower superlink|supernode`` from Flower's environment;
stopping it also stops the ``flower-superexec`` and app processes it started (found by parent
id: Flower starts them in sessions of their own). ``FLWR_HOME`` is the federation's own
directory. With :class:`TLSFiles` the SuperLink serves over TLS and, with node authentication,
admits only the SuperNodes whose public key was registered (:meth:`LocalFederation.register`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Return once something listens on 127.0.0.1:``port``.

    Raises:
        RuntimeError: the process exited first.
        TimeoutError: nothing listens after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (children first found, from ``/proc``; Linux).

    Flower's SuperLink and SuperNode start ``flower-superexec`` in a session of its own, so
    stopping a process group leaves it running; it is found here by parent id instead.
    """
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _kill(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@dataclass(frozen=True)
class TLSFiles:
    """The SuperLink's TLS files and whether it authenticates SuperNodes.

    Attributes:
        ca: the CA certificate (the nodes' and ``flwr``'s root certificates).
        certfile: the SuperLink's certificate (its SAN must name 127.0.0.1).
        keyfile: the certificate's private key.
        supernode_auth: admit only registered SuperNodes (``--enable-supernode-auth``).
    """

    ca: Path
    certfile: Path
    keyfile: Path
    supernode_auth: bool = False


@dataclass
class LocalFederation:
    """A SuperLink and its SuperNodes on 127.0.0.1.

    Attributes:
        root: where ``FLWR_HOME`` and the processes' logs go.
        bin_dir: Flower's environment's ``bin`` (``.venv-flower/bin``).
        data: the data directory every node reads its own clients' files from.
        base: the nodes' base checkpoint (``None``: the run's).
        threads: torch threads of every process (``OMP_NUM_THREADS``), as ``--threads`` for
            the in-process engine.
        tls: TLS (and node authentication) of the SuperLink; ``None``: insecure.
    """

    root: Path
    bin_dir: Path
    data: Path
    base: str | None = None
    threads: int = 1
    tls: TLSFiles | None = None
    port: int = field(default_factory=free_port)
    superlink: subprocess.Popen | None = None
    simulation: bool = False
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """The environment of every process (and of ``pflkit train --engine flower``)."""
        return {**os.environ, "FLWR_HOME": str(self.root / "flwr-home"),
                "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false"}

    def start(self, node_clients: tuple[str, ...] = (), *, simulation: bool = False) -> None:
        """Start the SuperLink, then one SuperNode per entry (``"0-3"``, ``"4"``, ...).

        With ``simulation`` the SuperLink is Flower's simulation engine (no SuperNodes).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self.simulation = simulation
        args = ["superlink", "--port", str(self.port), *(["--simulation"] if simulation else [])]
        if self.tls is not None:
            args += ["--ssl-ca-certfile", str(self.tls.ca), "--ssl-certfile",
                     str(self.tls.certfile), "--ssl-keyfile", str(self.tls.keyfile),
                     *(["--enable-supernode-auth"] if self.tls.supernode_auth else [])]
        self.superlink = self._spawn("superlink", args)
        wait_for_port(self.port, self.superlink)
        for clients in node_clients:
            self.start_node(clients)

    def start_node(self, clients: str, private_key: Path | None = None) -> subprocess.Popen:
        """Start a SuperNode running ``clients`` (authenticated with ``private_key``)."""
        args = ["supernode", "--client", clients, "--data", str(self.data),
                "--superlink", f"127.0.0.1:{self.port}", "--port", str(free_port())]
        if self.base is not None:
            args += ["--base", self.base]
        if self.tls is not None:
            args += ["--root-certificates", str(self.tls.ca)]
        if private_key is not None:
            args += ["--auth-supernode-private-key", str(private_key)]
        self.nodes[clients] = self._spawn(f"supernode-{clients}", args)
        return self.nodes[clients]

    def register(self, public_key: Path) -> subprocess.CompletedProcess:
        """``flwr supernode register``: admit the SuperNode of this public key."""
        return subprocess.run(
            [str(self.bin_dir / "flwr"), "supernode", "register", str(public_key),
             "local-deployment"], env=self.env, capture_output=True, text=True, timeout=120,
            check=False)

    def kill_node(self, clients: str) -> None:
        """SIGKILL a node's process group: a crash, no goodbye to the SuperLink."""
        process = self.nodes.pop(clients)
        _kill([process.pid, *descendants(process.pid)], signal.SIGKILL)
        process.wait(timeout=30)

    def train(self, out: Path, *options: str, timeout: float = 1800.0
              ) -> subprocess.CompletedProcess:
        """``pflkit train --engine flower`` (or ``flower-simulation``) on this federation."""
        engine, connection = (("flower-simulation", "local-simulation") if self.simulation
                              else ("flower", "local-deployment"))
        return subprocess.run(
            [str(self.bin_dir / "pflkit"), "train", "--engine", engine, "--federation",
             connection, "--data", str(self.data), "--out", str(out), "--no-progress",
             *options],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        with open(self.root / f"{name}.log", "ab") as log:
            return subprocess.Popen([str(self.bin_dir / "pflkit"), "flower", *args],
                                    env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 30 s)."""
        processes = [p for p in [*self.nodes.values(), self.superlink] if p is not None]
        under = [pid for p in processes for pid in descendants(p.pid)]
        _kill([p.pid for p in processes if p.poll() is None], signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill([process.pid], signal.SIGKILL)
                process.wait(timeout=30)
        _kill(under, signal.SIGTERM)
        time.sleep(1)
        _kill([pid for pid in under if Path(f"/proc/{pid}").exists()], signal.SIGKILL)
        self.nodes.clear()
        self.superlink = None

    def __enter__(self) -> LocalFederation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
