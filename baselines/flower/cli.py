"""``pflkit flower superlink|supernode`` and the launcher of ``pflkit train --engine flower``.

Thin wrappers over Flower's own commands (``flower-superlink``, ``flower-supernode``,
``flwr run``) from the environment ``make flower-setup`` builds; nothing here imports flwr, so
``pflkit --help`` stays light and a missing flwr is reported with what to run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import click

from baselines.flower import FLOWER_SETUP_HINT
from baselines.flower.federation import parse_clients

#: the Flower App `flwr run` packs (its components are the kit's installed modules).
APP_DIR = Path(__file__).resolve().parent / "app"
#: SuperLink connection that `pflkit flower superlink` writes and `--federation` names.
LOCAL_CONNECTION = "local-deployment"
#: the connection of `pflkit flower superlink --simulation`.
SIMULATION_CONNECTION = "local-simulation"
DEFAULT_PORT = 9092
#: addresses with which ``flwr`` starts and manages a SuperLink of its own (nothing to probe).
FLOWER_MANAGED_ADDRESSES = (":local:", ":local-in-memory:")


def flower_command(name: str) -> str:
    """The path of one of Flower's commands beside this Python, or a clear error.

    Raises:
        click.ClickException: flwr is not installed here.
    """
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    try:
        import flwr  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        raise click.ClickException(FLOWER_SETUP_HINT)
    return found


def flower_env() -> dict[str, str]:
    """The environment for Flower's commands: its bin directory first on ``PATH``.

    The SuperLink and the SuperNode start ``flower-superexec`` (and it ``flwr-serverapp`` or
    ``flwr-clientapp``) by name, so they must find the ones of their own environment.
    """
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


def flwr_home() -> Path:
    """Flower's configuration directory (``$FLWR_HOME``, else ``~/.flwr``)."""
    return Path(os.environ.get("FLWR_HOME", Path.home() / ".flwr"))


def write_connection(name: str, address: str, *, insecure: bool,
                     root_certificates: str | None = None) -> Path:
    """Add or replace the SuperLink connection ``name`` in ``$FLWR_HOME/config.toml``.

    Other connections of the file are kept. Returns the file's path.
    """
    import tomllib

    path = flwr_home() / "config.toml"
    data: dict = tomllib.loads(path.read_text()) if path.exists() else {}
    superlink = data.setdefault("superlink", {})
    entry: dict[str, object] = {"address": address, "insecure": insecure}
    if root_certificates is not None:
        entry["root-certificates"] = str(Path(root_certificates).resolve())
    superlink[name] = entry
    superlink.setdefault("default", name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_toml(data))
    return path


def default_connection(simulation: bool) -> str:
    """The connection ``pflkit flower superlink`` writes for an engine (``--federation``'s
    default)."""
    return SIMULATION_CONNECTION if simulation else LOCAL_CONNECTION


def start_instructions(simulation: bool) -> str:
    """What to start, in other terminals, before ``pflkit train --engine flower[-simulation]``."""
    pflkit = Path(sys.executable).parent / "pflkit"
    if simulation:
        return (f"start Flower's simulation engine with `{pflkit} flower superlink --simulation` "
                f"and pass `--federation {SIMULATION_CONNECTION}`")
    return (f"start a SuperLink with `{pflkit} flower superlink` and one SuperNode per client "
            f"organisation with `{pflkit} flower supernode --client K --data DIR`, and pass "
            f"`--federation {LOCAL_CONNECTION}`")


def read_connections() -> dict[str, dict]:
    """The SuperLink connections of ``$FLWR_HOME/config.toml`` by name (none: ``{}``).

    Raises:
        click.ClickException: the file is not valid TOML.
    """
    import tomllib

    path = flwr_home() / "config.toml"
    if not path.is_file():
        return {}
    try:
        superlink = tomllib.loads(path.read_text()).get("superlink", {})
    except tomllib.TOMLDecodeError as error:
        raise click.ClickException(f"{path} is not valid TOML ({error}); fix or delete it, then "
                                   "start the SuperLink again (it rewrites its entry)") from None
    return {name: entry for name, entry in superlink.items() if isinstance(entry, dict)}


def answers(address: str, timeout: float = 3.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (``[v6]:port`` too)."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return False
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout):
            return True
    except OSError:
        return False


def check_connection(name: str, *, simulation: bool) -> None:
    """Fail, before anything is started, unless connection ``name`` exists and its SuperLink
    answers.

    Args:
        name: the ``--federation`` (a SuperLink connection of ``$FLWR_HOME/config.toml``).
        simulation: ``--engine flower-simulation`` (the instructions name its SuperLink).

    Raises:
        click.ClickException: saying which command to start and which ``--federation`` to pass.
    """
    path = flwr_home() / "config.toml"
    entry = read_connections().get(name)
    todo = start_instructions(simulation)
    if entry is None:
        known = ", ".join(sorted(read_connections())) or "none"
        raise click.ClickException(
            f"no SuperLink connection {name!r} in {path} (connections there: {known}), so "
            f"nothing was started: {todo}")
    address = str(entry.get("address", ""))
    if address in FLOWER_MANAGED_ADDRESSES:
        return
    if not answers(address):
        raise click.ClickException(
            f"the SuperLink of connection {name!r} ({address or 'no address'}, from {path}) "
            f"does not answer, so nothing was started: {todo}")


def _toml(data: dict) -> str:
    """The small TOML subset of Flower's configuration file (tables of scalars)."""
    import json

    lines: list[str] = []

    def table(prefix: str, values: dict) -> None:
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if scalars or not prefix:
            if prefix:
                lines.append(f"[{prefix}]")
            for key, value in scalars.items():
                text = ("true" if value else "false") if isinstance(value, bool) else json.dumps(value)
                lines.append(f"{key} = {text}")
            lines.append("")
        for key, value in values.items():
            if isinstance(value, dict):
                table(f"{prefix}.{key}" if prefix else key, value)

    table("", data)
    return "\n".join(lines).lstrip("\n")


@click.group("flower")
def flower() -> None:
    """Run the federation on Flower's deployment engine (SuperLink and SuperNodes).

    Start one SuperLink, one SuperNode per client organisation, then
    `pflkit train --engine flower --federation local-deployment ...`. Needs the environment
    `make flower-setup` builds (.venv-flower/bin/pflkit).
    """


@flower.command("superlink")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address the SuperLink listens on (0.0.0.0 for other machines).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int,
              help="Port of its HTTP APIs (SuperNodes, `flwr run` and the ServerApp).")
@click.option("--connection",
              help="Name of the SuperLink connection written to $FLWR_HOME/config.toml "
                   "(default: local-deployment, local-simulation with --simulation).")
@click.option("--simulation", is_flag=True,
              help="Flower's simulation engine: no SuperNodes, the SuperLink runs one ClientApp "
                   "per client on Ray (`pflkit train --engine flower-simulation`).")
@click.option("--ssl-certfile", type=click.Path(dir_okay=False, exists=True),
              help="TLS certificate (with --ssl-keyfile and --ssl-ca-certfile); without: insecure.")
@click.option("--ssl-keyfile", type=click.Path(dir_okay=False, exists=True))
@click.option("--ssl-ca-certfile", type=click.Path(dir_okay=False, exists=True))
@click.option("--enable-supernode-auth", is_flag=True,
              help="Only registered SuperNodes may connect (`flwr supernode register`; needs TLS).")
@click.option("--database", help="SQLite file of the SuperLink's state (default: in memory).")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def superlink(host: str, port: int, connection: str | None, simulation: bool, ssl_certfile: str | None,
              ssl_keyfile: str | None, ssl_ca_certfile: str | None,
              enable_supernode_auth: bool, database: str | None, extra: tuple[str, ...]) -> None:
    """Start Flower's SuperLink (after `--`, more flower-superlink options).

    Writes the connection (address, TLS) that `flwr run` and `pflkit train --engine flower
    --federation NAME` use into $FLWR_HOME/config.toml, then becomes `flower-superlink`.
    """
    command = flower_command("flower-superlink")
    if connection is None:
        connection = SIMULATION_CONNECTION if simulation else LOCAL_CONNECTION
    secure = ssl_certfile is not None
    if secure and (ssl_keyfile is None or ssl_ca_certfile is None):
        raise click.BadParameter("TLS needs --ssl-certfile, --ssl-keyfile and --ssl-ca-certfile")
    if enable_supernode_auth and not secure:
        raise click.BadParameter("SuperNode authentication needs TLS (--ssl-certfile ...)",
                                 param_hint="--enable-supernode-auth")
    address = f"{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    path = write_connection(connection, address, insecure=not secure,
                            root_certificates=ssl_ca_certfile)
    click.echo(f"SuperLink connection {connection!r} ({address}) in {path}", err=True)
    args = [command, "--host", host, "--port", str(port),
            "--disable-runtime-dependency-installation"]
    if secure:
        args += ["--ssl-certfile", ssl_certfile, "--ssl-keyfile", ssl_keyfile,
                 "--ssl-ca-certfile", ssl_ca_certfile]
    else:
        args.append("--insecure")
    if enable_supernode_auth:
        args.append("--enable-supernode-auth")
    if simulation:
        args.append("--simulation")
    if database:
        args += ["--database", database]
    os.execve(command, [*args, *extra], flower_env())


@flower.command("supernode")
@click.option("--client", "clients", required=True,
              help="The client id(s) this node runs: 3, 0,1,2 or 4-6.")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="Data directory with this node's imdb_train_client_{k}.npy (only those are read).")
@click.option("--superlink", "superlink_address", default=f"127.0.0.1:{DEFAULT_PORT}",
              show_default=True, help="The SuperLink's address (host:port).")
@click.option("--port", type=int,
              help="Port of this node's runtime API (default 9100 + its first client, so nodes "
                   "on one machine do not collide).")
@click.option("--base", help="This node's copy of the base checkpoint (default: the run's).")
@click.option("--root-certificates", type=click.Path(dir_okay=False, exists=True),
              help="CA certificate of the SuperLink's TLS (without: insecure).")
@click.option("--auth-supernode-private-key", type=click.Path(dir_okay=False, exists=True),
              help="This node's private key (SuperNode authentication; needs TLS).")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def supernode(clients: str, data_dir: str, superlink_address: str, port: int | None,
              base: str | None, root_certificates: str | None,
              auth_supernode_private_key: str | None, extra: tuple[str, ...]) -> None:
    """Start Flower's SuperNode for client(s) K of the data (after `--`, more options)."""
    command = flower_command("flower-supernode")
    try:
        ids = parse_clients(clients)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--client") from None
    if auth_supernode_private_key and not root_certificates:
        raise click.BadParameter("SuperNode authentication needs TLS (--root-certificates)",
                                 param_hint="--auth-supernode-private-key")
    node_config = f'clients="{",".join(map(str, ids))}" data="{Path(data_dir).resolve()}"'
    if base is not None:
        node_config += f' base="{base}"'
    args = [command, "--superlink", superlink_address,
            "--port", str(port if port is not None else 9100 + ids[0]),
            "--node-config", node_config]
    args += (["--root-certificates", root_certificates] if root_certificates
             else ["--insecure"])
    if auth_supernode_private_key:
        args += ["--auth-supernode-private-key", auth_supernode_private_key]
    os.execve(command, [*args, *extra], flower_env())


def run_on_flower(*, federation: str, out: Path, num_clients: int, on_failure: str,
                  resume: bool, reply_timeout: float | None = None,
                  simulation: bool = False) -> dict:
    """``flwr run`` of the kit's app on a SuperLink connection, until the run ends.

    With ``simulation``, the SuperLink is Flower's simulation engine and runs one node per
    client (``num-supernodes`` = K; node ``partition-id`` k runs client k).

    Returns:
        The ServerApp's summary (``RUN_DIR/flower_summary.json``).

    Raises:
        click.ClickException: flwr is missing, or the run ended without a summary.
    """
    import json

    command = flower_command("flwr")
    summary = out / "flower_summary.json"
    summary.unlink(missing_ok=True)
    settings = (f'out="{out.resolve()}" num-clients={num_clients} on-failure="{on_failure}" '
                f'resume={"true" if resume else "false"}')
    if reply_timeout is not None:
        settings += f" reply-timeout={float(reply_timeout)}"
    args = [command, "run", str(APP_DIR), federation, "--stream", "--run-config", settings]
    if simulation:
        args += ["--federation-config", f"num-supernodes={num_clients}"]
    completed = subprocess.run(args, check=False, env=flower_env())
    if not summary.exists():
        raise click.ClickException(unfinished_run_message(out, completed.returncode))
    return json.loads(summary.read_text())


def unfinished_run_message(out: Path, returncode: int) -> str:
    """What to do after ``flwr run`` ended without a summary.

    ``--resume`` is suggested only when a round was committed to ``out``; otherwise the run
    never started, and resuming would have nothing to continue.
    """
    from baselines.run_directory import RunDirectory

    faults = out / "flower_faults.jsonl"
    where = f"its log is above{f', faults in {faults}' if faults.exists() else ''}"
    if RunDirectory(out).has_state():
        return (f"the Flower run ended without finishing (flwr exit status {returncode}); "
                f"{where}; the run directory holds the last completed round: continue with "
                "--resume")
    return (f"the Flower run ended before its first round was completed (flwr exit status "
            f"{returncode}); {where}; there is nothing to resume: fix the cause, then start "
            f"again with a new --out (or after deleting {out})")
