"""A federation over TLS with SuperNode authentication, as the README's "Several machines" (slow).

A CA and a server certificate (openssl) and P-384 node keys (ssh-keygen), made as the README
says; `pflkit flower superlink` with `--ssl-*` and `--enable-supernode-auth`; the nodes' public
keys registered with `flwr supernode register`; two SuperNodes with `--root-certificates` and
`--auth-supernode-private-key` run a one-round `lora` federation equal to the in-process run,
and a SuperNode whose key was not registered is refused. Needs ``.venv-flower``.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from baselines.flower.local import LocalFederation, TLSFiles
from tests.baselines.flower_runs import (
    FLOWER_BIN,
    assert_same_run,
    run_in_process,
    skip_without_flower,
)

pytestmark = pytest.mark.slow

skip_without_flower()
if shutil.which("openssl") is None or shutil.which("ssh-keygen") is None:
    pytest.skip("openssl and ssh-keygen are needed to make the certificates and keys",
                allow_module_level=True)


def _run(*args: str | Path, cwd: Path) -> None:
    subprocess.run([str(arg) for arg in args], cwd=cwd, check=True, capture_output=True)


def _certificates(directory: Path) -> TLSFiles:
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    directory.mkdir()
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-days", "1", "-subj", "/CN=pflkit test CA", cwd=directory)
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
         "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "san.ext",
         cwd=directory)
    return TLSFiles(ca=directory / "ca.crt", certfile=directory / "server.pem",
                    keyfile=directory / "server.key", supernode_auth=True)


def _node_key(directory: Path, name: str) -> Path:
    """A P-384 key pair in OpenSSH format (``name`` and ``name.pub``)."""
    directory.mkdir(exist_ok=True)
    _run("ssh-keygen", "-q", "-t", "ecdsa", "-b", "384", "-N", "", "-f", name, cwd=directory)
    return directory / name


def test_tls_and_supernode_authentication(tmp_path: Path, tiny_data: Path,
                                          tiny_base: Path) -> None:
    tls = _certificates(tmp_path / "certs")
    keys = {clients: _node_key(tmp_path / "keys", f"node-{clients}") for clients in ("0-4", "5-9")}
    stranger = _node_key(tmp_path / "keys", "stranger")
    with LocalFederation(root=tmp_path / "federation", bin_dir=FLOWER_BIN, data=tiny_data,
                         tls=tls) as federation:
        federation.start()
        connection = tomllib.loads((federation.root / "flwr-home" / "config.toml").read_text())
        assert connection["superlink"]["local-deployment"]["insecure"] is False
        for key in keys.values():
            registered = federation.register(key.with_suffix(".pub"))
            assert registered.returncode == 0, registered.stdout + registered.stderr
        for clients, key in keys.items():
            federation.start_node(clients, key)

        refused = federation.start_node("0-9", stranger)
        assert refused.wait(timeout=300) != 0
        superlink_log = (federation.root / "superlink.log").read_text()
        assert "No SuperNode found with the given public key" in superlink_log

        flower, in_process = tmp_path / "flower", tmp_path / "in-process"
        done = federation.train(flower, "--preset", "lora", "--base", str(tiny_base),
                                "--val-limit", "0", "--threads", "1", "--rounds", "1",
                                "--local-epochs", "1", timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_in_process("lora", {"rounds": 1, "local_epochs": 1}, tiny_data, tiny_base, in_process)
    assert_same_run(flower, in_process)
