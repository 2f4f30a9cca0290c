"""Command-line group of the `accountant` package (wired into `pflkit` by pflkit/cli.py).

``pflkit dp epsilon`` and ``pflkit dp noise``. The accountants (opacus, torch, dp-accounting)
are imported inside the commands so ``pflkit --help`` stays fast. ``pflkit dp verify`` reads an
untrusted privacy.json with the benchmark's strict reader, which the accountant may not import,
so it joins this group in :mod:`pflkit.dp`.
"""

from __future__ import annotations

import json

import click

_RATE_OPTIONS = (
    click.option("--sample-rate", type=float, help="Poisson sampling rate q in (0, 1]."),
    click.option("--steps", type=int, help="Number of steps (exact integer)."),
    click.option(
        "--clients-per-round", type=int, help="Federated form: clients sampled per round (M)."
    ),
    click.option("--clients", type=int, help="Federated form: clients in the federation (K)."),
    click.option(
        "--providers-per-round",
        type=int,
        help="Federated form: providers sampled per client per round (m).",
    ),
    click.option(
        "--min-providers", type=int, help="Federated form: fewest providers at any client (N)."
    ),
    click.option("--rounds", type=int, help="Federated form: rounds (the steps)."),
    click.option(
        "--analysis",
        type=click.Choice(["competition", "strict"]),
        default="competition",
        show_default=True,
        help="Federated form: q = M/K x m/N (competition) or m/N (strict).",
    ),
    click.option("--delta", type=float, default=1e-5, show_default=True, help="Target delta."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table."),
)


def _rate_options(function):
    for option in reversed(_RATE_OPTIONS):
        function = option(function)
    return function


@click.group(name="dp")
def dp() -> None:
    """Differential privacy: epsilon and noise calibration (`pflkit dp` adds declaration checks)."""


@dp.command(name="epsilon")
@click.option("--noise-multiplier", type=float, required=True, help="Noise std over clipping norm.")
@_rate_options
def epsilon_command(noise_multiplier, as_json, delta, **rate_args) -> None:
    """Epsilon of the sampled Gaussian mechanism: RDP (authoritative), PRV and PLD."""
    from accountant.cross_check import estimate_epsilons

    sample_rate, steps, form = _resolve_rate(rate_args)
    estimates = _call(
        estimate_epsilons,
        noise_multiplier=noise_multiplier,
        sample_rate=sample_rate,
        steps=steps,
        delta=delta,
    )
    result = {**form, **estimates.to_dict()}
    if as_json:
        click.echo(json.dumps(result, allow_nan=False))
        return
    from rich.console import Console
    from rich.table import Table

    from accountant.report import ACCOUNTANT_TITLES

    table = Table(
        title=f"epsilon at delta {delta:g} (sigma {noise_multiplier:g}, q {sample_rate:.6g}, {steps} steps)"
    )
    table.add_column("accountant")
    table.add_column("epsilon", justify="right")
    table.add_column("role")
    table.add_column("seconds", justify="right")
    for name, value in estimates.epsilon.items():
        shown = (
            f"{value:.4f}" if value is not None else "not run: " + estimates.skipped.get(name, "")
        )
        role = "authoritative" if name == estimates.authoritative else "cross-check"
        table.add_row(
            ACCOUNTANT_TITLES.get(name, name), shown, role, f"{estimates.seconds.get(name, 0):.2f}"
        )
    console = Console()
    console.print(table)
    if estimates.rdp_order is not None:
        console.print(f"RDP optimal order: {estimates.rdp_order:g}")


@dp.command(name="noise")
@click.option("--epsilon", type=float, required=True, help="Target epsilon (> 0).")
@_rate_options
def noise_command(epsilon, as_json, delta, **rate_args) -> None:
    """Smallest noise multiplier (to 1e-4) whose RDP epsilon does not exceed --epsilon."""
    from accountant.analysis.rdp import compute_epsilon
    from accountant.calibration import PRECISION, get_noise_multiplier

    sample_rate, steps, form = _resolve_rate(rate_args)
    sigma = _call(
        get_noise_multiplier,
        target_epsilon=epsilon,
        delta=delta,
        sample_rate=sample_rate,
        steps=steps,
    )
    achieved, order = compute_epsilon(
        noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta
    )
    result = {
        **form,
        "noise_multiplier": sigma,
        "target_epsilon": epsilon,
        "delta": delta,
        "sample_rate": sample_rate,
        "steps": steps,
        "rdp_epsilon": achieved,
        "rdp_order": order,
        "precision": PRECISION,
    }
    if as_json:
        click.echo(json.dumps(result, allow_nan=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"noise for epsilon {epsilon:g} at delta {delta:g}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("noise_multiplier", f"{sigma:.4f}")
    table.add_row("RDP epsilon at it", f"{achieved:.6f}")
    table.add_row("sample rate q", f"{sample_rate:.6g}")
    table.add_row("steps", str(steps))
    Console().print(table)


def _resolve_rate(args: dict) -> tuple[float, int, dict]:
    """(sample_rate, steps, description) from exactly one of the two option forms."""
    direct = {k: args[k] for k in ("sample_rate", "steps")}
    federated = {
        k: args[k]
        for k in ("clients_per_round", "clients", "providers_per_round", "min_providers", "rounds")
    }
    given_direct = [k for k, v in direct.items() if v is not None]
    given_federated = [k for k, v in federated.items() if v is not None]
    if given_direct and given_federated:
        raise click.UsageError(
            "give either --sample-rate/--steps or the federated options, not both"
        )
    if given_direct:
        missing = [k for k, v in direct.items() if v is None]
        if missing:
            raise click.UsageError(f"missing --{missing[0].replace('_', '-')}")
        return direct["sample_rate"], direct["steps"], {}
    missing = [k for k, v in federated.items() if v is None]
    if missing:
        raise click.UsageError(
            "give --sample-rate and --steps, or all of --clients-per-round, --clients, "
            f"--providers-per-round, --min-providers, --rounds (missing --{missing[0].replace('_', '-')})"
        )
    from accountant.federated import federated_sample_rate

    rounds = federated.pop("rounds")
    rate = _call(federated_sample_rate, analysis=args["analysis"], **federated)
    return rate, rounds, {"analysis": args["analysis"], **federated, "rounds": rounds}


def _call(function, **kwargs):
    """Run ``function`` and turn a ValueError into a usage error naming the bad value."""
    try:
        return function(**kwargs)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
