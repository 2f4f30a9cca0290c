"""Command-line group of the `evaluator` package (wired into `pflkit` by pflkit/cli.py).

``pflkit worker`` (scoring workers, on any machine), ``pflkit team create`` (register a team, print
its token), ``pflkit submit`` (participants) and ``pflkit evaluator backup|restore``
(organisers). ``pflkit serve``, which runs the API with the
leaderboard's pages, is assembled above both packages in ``pflkit/serve.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

_DB = click.option(
    "--db",
    "database_url",
    default=None,
    metavar="URL",
    help="database URL (default: SQLite file in the storage directory; "
    "env PFLKIT_EVALUATOR_DATABASE_URL)",
)
_STORAGE = click.option(
    "--storage",
    "storage_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="upload storage directory (env PFLKIT_EVALUATOR_STORAGE_DIR)",
)
_DATA = click.option(
    "--data",
    "data_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="benchmark directory with the hidden test split (env PFLKIT_EVALUATOR_DATA_DIR)",
)
#: the largest privacy.json the audit command reads (a declaration is a few hundred bytes)
PRIVACY_FILE_LIMIT = 64 * 1024
#: the canary attacks (``evaluator.canary_audit.ATTACKS``, named here to keep --help light)
ATTACK_NAMES = ("secret", "question", "calibrated")
_QUEUE = click.option(
    "--queue",
    "queue_url",
    default=None,
    metavar="URL",
    help="sqlite:///PATH or redis://HOST:PORT/DB (env PFLKIT_EVALUATOR_QUEUE_URL)",
)


def settings_from(**overrides: Any):  # type: ignore[no-untyped-def]
    """Settings from the environment with the given command-line values on top."""
    from pydantic import ValidationError

    from evaluator.core.config import Settings

    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise click.UsageError(f"unsafe or invalid evaluator settings: {problems}") from None


def configure_logging(level: str) -> None:
    """Log to stderr with timestamps at ``level``."""
    import logging

    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def service_settings(options: dict[str, Any], *, scores: bool | None) -> Any:
    """The settings of a service command, with logging configured and the data checked.

    Args:
        options: the command's options, named as the settings' fields (``None``: unset, the
            environment or the default applies).
        scores: whether this process scores submissions, so needs the hidden test split
            (``None``: when the settings run an embedded worker).

    Returns:
        The settings.

    Raises:
        click.UsageError: invalid settings, or a scoring process without test data.
    """
    settings = settings_from(**options)
    configure_logging(settings.log_level)
    if settings.embedded_worker if scores is None else scores:
        check_data(settings)
        check_device(settings)
    return settings


def check_device(settings: Any) -> None:
    """Stop with a usage error unless the scoring device exists on this machine."""
    from benchmark.model.device import resolve_device

    try:
        resolve_device(settings.device)
    except ValueError as error:
        raise click.UsageError(f"{error} (PFLKIT_EVALUATOR_DEVICE)") from None


def check_data(settings: Any) -> None:
    """Stop with a usage error unless the settings name a benchmark with a hidden test split."""
    from evaluator.benchmark_info import test_split_path

    if settings.data_dir is None:
        raise click.UsageError(
            "the scoring worker needs the benchmark directory: pass --data DIR "
            "(as written by `pflkit data generate`), or --no-worker"
        )
    if test_split_path(settings.data_dir) is None:
        raise click.UsageError(
            f"{settings.data_dir} holds no hidden test split "
            "(evaluator/imdb_test.npy); pass the organisers' benchmark directory"
        )


@click.command()
@_DB
@_QUEUE
@_DATA
@_STORAGE
@click.option(
    "--device",
    default=None,
    help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N (env PFLKIT_EVALUATOR_DEVICE)",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16"]),
    default=None,
    help="fp32 (default) or bf16 autocast (env PFLKIT_EVALUATOR_PRECISION)",
)
@click.option(
    "--threads",
    "worker_threads",
    default=None,
    type=int,
    help="jobs scored at once in this process (default 1)",
)
def worker(**options: Any) -> None:
    """Run a scoring worker (start several, on several machines with a Redis queue)."""
    from evaluator.worker import run_worker

    settings = service_settings(options, scores=True)
    parent = os.environ.get("PFLKIT_EVALUATOR_PARENT_PID")
    run_worker(settings, parent_pid=int(parent) if parent and parent.isdigit() else None)


@click.group()
def team() -> None:
    """Manage the teams allowed to submit."""


@team.command("create")
@click.argument("name")
@_DB
@_STORAGE
@click.option("--organiser", is_flag=True, help="give the team the organiser role")
@click.option("--json", "as_json", is_flag=True, help='print {"token": ...} as JSON')
def team_create(
    name: str, database_url: str | None, storage_dir: Path | None, organiser: bool, as_json: bool
) -> None:
    """Register team NAME and print its API token (shown once; only its hash is stored)."""
    from evaluator import crud
    from evaluator.core.db import migrate, session_scope

    settings = settings_from(database_url=database_url, storage_dir=storage_dir)
    migrate(settings.db_url)
    try:
        with session_scope(settings.db_url) as session:
            created, token = crud.create_team(session, name=name, organiser=organiser)
            team_id, name = created.id, created.name
    except crud.TeamExists as exc:
        raise click.ClickException(f"{exc}; choose another name") from None
    except crud.InvalidTeamName as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    if as_json:
        click.echo(
            json.dumps({"token": token, "team": name, "id": team_id, "organiser": organiser})
        )
    else:
        click.echo(token)
        click.echo(
            f"team {name!r} created (id {team_id}{', organiser' if organiser else ''}); "
            "keep the token: it cannot be shown again",
            err=True,
        )


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--server", required=True, envvar="PFLKIT_SERVER", help="evaluator URL")
@click.option("--token", required=True, envvar="PFLKIT_TOKEN", help="your team's API token")
@click.option("--wait/--no-wait", default=False, help="poll until the submission is scored")
@click.option("--timeout", default=3600.0, show_default=True, help="seconds to wait with --wait")
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
def submit(
    run_dir: Path, server: str, token: str, wait: bool, timeout: float, as_json: bool
) -> None:
    """Upload RUN_DIR (checkpoint/model.safetensors, communication_log.csv and .jsonl,
    submission.json, privacy.json for track 2, personal/client_{k}.safetensors for track 3) to
    the evaluator."""
    from evaluator import client

    try:
        accepted = client.submit(run_dir, server=server, token=token)
        result = (
            client.wait(accepted["id"], server=server, token=token, timeout=timeout)
            if wait
            else accepted
        )
    except client.SubmitError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result))
    elif not wait:
        click.echo(f"submission {result['id']} {result['status']}: {result['url']}")
    else:
        _print_record(result)
    if wait and result["status"] != "finished":
        sys.exit(1)


def _track_figures_line(track: int, results: dict[str, Any]) -> str:
    """The track's own scalar figures that have a value, with their headings (track 3: the
    mean personalised ANLS, its spread, the worst client, the global model's figures)."""
    from benchmark.tracks import TRACKS

    if track not in TRACKS:
        return ""
    shown = []
    for figure in TRACKS[track].figures:
        value = results.get(figure.name)
        if figure.scalar and value is not None:
            shown.append(f"{figure.heading} {value:.4f}" if figure.kind == "float"
                         else f"{figure.heading} {value}")  # fmt: skip
    return ", ".join(shown)


def _print_record(result: dict[str, Any]) -> None:
    """A submission's public record for people: its status, scores, privacy verification,
    personalisation and the organisers' re-run of its recipe."""
    click.echo(
        f"submission {result['id']} {result['status']}"
        + (f": {result['reason']}" if result.get("reason") else "")
    )
    if result["status"] != "finished":
        return
    results = result["results"]
    click.echo(
        f"  ANLS {result['anls']:.4f}  accuracy {result['accuracy']:.4f}  "
        f"total bytes {result['total_bytes']:,}"
    )
    if results.get("privacy_verified") is not None:
        click.echo(
            f"  privacy claim epsilon={results['epsilon']}: "
            + ("verified" if results["privacy_verified"] else "NOT verified")
        )
    own = _track_figures_line(result["track"], results)
    if own:
        click.echo(f"  {own}")
    if results.get("reproduction") is not None:
        click.echo(
            f"  the organisers' re-run of its recipe: {results['reproduction']}"
            + (f" ({results['reproduction_reason']})" if results.get("reproduction_reason")
               else "")  # fmt: skip
        )


@click.command()
@click.argument("submission_id")
@click.option("--server", required=True, envvar="PFLKIT_SERVER", help="evaluator URL")
@click.option("--token", required=True, envvar="PFLKIT_TOKEN", help="your team's API token")
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
def status(submission_id: str, server: str, token: str, as_json: bool) -> None:
    """Print your submission SUBMISSION_ID's status, scores and the organisers' re-run of its
    recipe (when they re-run it) as the evaluator holds them now."""
    from evaluator import client

    try:
        result = client.status(submission_id, server=server, token=token)
    except client.SubmitError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result))
    else:
        _print_record(result)

def _claim(run_dir: Path) -> tuple[float | None, float | None, dict | None]:
    """(epsilon, delta, the accountant's report) of the run's ``privacy.json``, or (None,
    None, None) without one."""
    import accountant
    from evaluator.validation.errors import InvalidSubmission
    from evaluator.validation.privacy import load_declaration

    path = run_dir / "privacy.json"
    if not path.is_file():
        return None, None, None
    try:
        declaration = load_declaration(path, max_bytes=PRIVACY_FILE_LIMIT)
    except InvalidSubmission as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    return declaration.epsilon, declaration.delta, accountant.verify(declaration).to_dict()


@click.command()
@click.argument(
    "run_dirs", nargs=-1, required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)  # fmt: skip
@click.option(
    "--data", "data_dir", required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="benchmark directory generated with --canaries (its evaluator/ part holds the coins)",
)  # fmt: skip
@click.option(
    "--base",
    default="base",
    show_default=True,
    help="the checkpoint every run started from (the scores are relative to it)",
)
@click.option(
    "--attack",
    type=click.Choice(ATTACK_NAMES),
    default="calibrated",
    show_default=True,
    help="how a canary is scored: its question probes' gains beyond what the base model's "
    "likelihood predicts (calibrated), their plain gains (question) or its identity probes' "
    "(secret)",
)
@click.option(
    "--probe-documents",
    type=click.IntRange(min=0),
    default=None,
    help="invoices per canary whose probes are scored (0: all; default: the worker's for "
    "the canaries' kind, evaluator.canary_audit.DEFAULT_PROBE_DOCUMENTS)",
)
@click.option("--threads", type=int, default=None, help="torch threads (default: torch's)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per run")
def audit(
    run_dirs: tuple[Path, ...],
    data_dir: Path,
    base: str,
    attack: str,
    probe_documents: int | None,
    threads: int | None,
    as_json: bool,
) -> None:
    """Organisers: the worker's one-run privacy audit of trained runs, offline.

    Each RUN_DIR holds checkpoint/ and, for a private run, privacy.json: its delta is the one
    the audit uses (1e-5 without one) and the claim tested is its mechanism's epsilon by the PLD
    accountant when that is below the declared epsilon, as in the worker. The base model's pass
    over the probes is made once for all runs.
    """
    import time

    import torch

    from benchmark.model import load_model
    from benchmark.model.loading import resolve_checkpoint
    from evaluator.canary_audit import CanaryAudit, audited_claim, contradicted

    if threads:
        torch.set_num_threads(threads)
    try:
        reference = resolve_checkpoint(base)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    documents = "kind" if probe_documents is None else probe_documents or None
    auditor = CanaryAudit(data_dir, reference, attack=attack, probe_documents=documents)
    if not auditor.available:
        raise click.ClickException(
            f"{data_dir} has no canaries (evaluator/canaries.json and imdb_canaries.npy): "
            "generate the benchmark with `pflkit data generate --canaries M`"
        )
    started = time.perf_counter()
    auditor.prepare()
    base_seconds = time.perf_counter() - started
    if not as_json:
        click.echo(f"base model's pass over the probes: {base_seconds:.1f} s")
    for run_dir in run_dirs:
        epsilon, delta, accountant_report = _claim(run_dir)
        tested, basis = audited_claim(epsilon, accountant_report)
        try:
            model = load_model(run_dir / "checkpoint")
        except (FileNotFoundError, ValueError) as exc:
            raise click.ClickException(f"{run_dir}: no checkpoint to audit ({exc})") from None
        columns = auditor.audit(model, delta)
        report = columns["audit_report"]
        row = {
            "run": str(run_dir), "claimed_epsilon": epsilon, "tested_epsilon": tested,
            "claim_basis": basis, "delta": report["delta"],
            "audit_epsilon": columns["audit_epsilon"], "auc": columns["audit_auc"],
            "snj_epsilon": report["epsilon_lower_bound"],
            "fdp_epsilon": report["fdp_epsilon_lower_bound"],
            "analysis": report["verdict_analysis"],
            "tpr": columns["audit_tpr"], "fpr": columns["audit_fpr"],
            "kind": report["kind"], "candidates": report["candidates"],
            "correct": report["correct"], "guesses": report["guesses"],
            "fdp_correct": report["fdp_correct"], "fdp_guesses": report["fdp_guesses"],
            "attack": report["attack"], "probe_documents": report["probe_documents"],
            "auc_by_attack": report["auc_by_attack"],
            "contradicted": contradicted(tested, columns["audit_epsilon"]),
            "audit_seconds": columns["audit_seconds"], "base_seconds": base_seconds,
        }  # fmt: skip
        if as_json:
            click.echo(json.dumps(row))
            continue
        claim = "no claim" if epsilon is None else f"claim epsilon {epsilon:g}"
        if basis == "mechanism":
            claim += f", its mechanism's {tested:.3f} by PLD tested"
        verdict = " CONTRADICTED BY AUDIT" if row["contradicted"] else ""
        click.echo(
            f"{run_dir}: lower bound {row['audit_epsilon']:.3f} ({claim}, delta {row['delta']:g})"
            f"{verdict}; SNJ {row['snj_epsilon']:.3f}, f-DP (Gaussian) {row['fdp_epsilon']:.3f}"
            f"; AUC {row['auc']:.3f}, TPR {row['tpr']:.3f} at FPR {row['fpr']:.3f}, "
            f"{row['fdp_correct']} of {row['fdp_guesses']} guesses right (f-DP's plan, "
            f"{row['kind']}); {row['audit_seconds']:.1f} s"
        )


@click.group("evaluator")
def evaluator_group() -> None:
    """Organisers: operate the evaluator (backups)."""


@evaluator_group.command("backup")
@click.argument("destination", type=click.Path(path_type=Path))
@_DB
@_STORAGE
def backup_command(destination: Path, database_url: str | None, storage_dir: Path | None) -> None:
    """Copy the database and the stored submissions to DESTINATION (a new directory), while the
    service runs: SQLite through its online backup API, PostgreSQL through pg_dump, both in one
    snapshot, then the files of that snapshot's submissions."""
    from evaluator.backup import BackupError, backup

    settings = settings_from(database_url=database_url, storage_dir=storage_dir)
    try:
        manifest = backup(settings, destination)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"backup of {manifest['database']} at migration {manifest['migration']} written to "
        f"{destination}: {manifest['teams']} teams, {manifest['submissions']} submissions, "
        f"{manifest['stored_bytes']:,} bytes of stored files (board version "
        f"{manifest['board_version']})"
    )


@evaluator_group.command("restore")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_DB
@_STORAGE
@click.option("--force", is_flag=True, help="replace a database and storage that hold data")
def restore_command(
    source: Path, database_url: str | None, storage_dir: Path | None, force: bool
) -> None:
    """Restore the backup SOURCE into the database and storage (stop the service first). An
    empty target only, unless --force."""
    from evaluator.backup import BackupError, restore

    settings = settings_from(database_url=database_url, storage_dir=storage_dir)
    try:
        manifest = restore(settings, source, force=force)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"restored {manifest['teams']} teams and {manifest['submissions']} submissions "
        f"(backup of {manifest['finished_at']}); start the service and its workers: queued "
        "submissions are sent to them again"
    )
