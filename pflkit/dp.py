"""``pflkit dp``: the accountant's commands and ``verify``, which checks a privacy.json claim.

``verify`` reads an untrusted file, so it reads it with the kit's one privacy.json reader,
``benchmark.privacy_file`` (through :mod:`baselines.privacy.declaration_file`); the accountant imports nothing else of the
kit, so the command lives here, above both, and joins the accountant's ``epsilon`` and ``noise``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from accountant.cli import dp as accountant_dp


@click.command(name="verify")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify_command(path: str, as_json: bool) -> None:
    """Check a privacy.json claim (or RUN_DIR/privacy.json); exit 1 when it fails, 2 when invalid."""
    from accountant.declaration import DeclarationError
    from accountant.verification import verify
    from baselines.privacy.declaration_file import load_declaration

    file = Path(path) / "privacy.json" if Path(path).is_dir() else Path(path)
    try:
        report = verify(load_declaration(file))
    except DeclarationError as error:
        raise click.UsageError(f"invalid privacy declaration {file}: {error}") from None
    if as_json:
        click.echo(report.to_json())
    else:
        _print_report(report)
    if not report.passed:
        sys.exit(1)


dp = click.Group(
    name="dp",
    help="Differential privacy: epsilon, noise calibration and declaration checks.",
    commands=[*accountant_dp.commands.values(), verify_command],
)


def _print_report(report: Any) -> None:
    """Rich rendering of a verification report."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    style = "bold green" if report.passed else "bold red"
    console.print(f"[{style}]{report.verdict}[/{style}] {report.summary().split(': ', 1)[1]}")
    table = Table(
        title=f"epsilon at delta {report.declared_delta:g} (declared {report.declared_epsilon:g})"
    )
    table.add_column("accountant")
    table.add_column("epsilon", justify="right")
    table.add_column("role")
    for row in report.epsilon_rows():
        table.add_row(*row)
    console.print(table)
    strict = report.strict
    strict_eps = "inf" if strict["epsilon"] is None else f"{strict['epsilon']:.4f}"
    console.print(
        f"RDP delta at the declared epsilon: {report.rdp_delta:.3g}; strict analysis "
        f"(q = {strict['sample_rate']:.6g}): RDP epsilon {strict_eps}"
    )
    for note in report.notes:
        console.print(f"- {note}", markup=False)
