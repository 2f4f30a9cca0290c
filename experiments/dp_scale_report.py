"""Issue 17's table: the competition's DP presets on the ``dp`` scale, seeds side by side.

Reads the run directories ``python -m experiments.run --track dp-scale`` writes
(``OUT/<preset>-eps<E>-seed<S>``, ``OUT/<preset>-noprivacy-seed<S>``, ``OUT/fedavg-seed0``,
``OUT/base``) and writes the table (val ANLS of every seed, their mean and spread, the verified
epsilon, the noise against the signal of the clipped sum) and two plots: ANLS against epsilon,
and the per-round validation curves of seed 0.

The noise-to-signal ratio of a client update is ``sigma S sqrt(d) / ||sum of clipped
updates||`` (``dp_noise_norm`` / ``dp_clipped_sum_norm`` in ``metrics.jsonl``, logged by
:func:`baselines.methods.dp_fedavg.noise_to_signal`): above 1 the update the server receives is
more noise than signal, in norm and per coordinate.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmark.figures import new_figure, save_figure
from experiments.report import format_bytes
from experiments.results_file import Column, Table, number, text

EPSILONS = (1, 4, 8)
NO_PRIVACY = "noprivacy"
#: the clipping table's budgets: epsilon 8 with S = 0.25, and with lr 1e-3 (S = 0.5)
CLIPPING_NORM_BUDGET = "eps8-clip0.25"
LARGER_STEP_BUDGET = "eps8-lr1e-3"
#: the clipping table's row labels, by budget
CLIPPING_ROWS = {
    "eps8": "S = 0.5, lr 2e-4 (the preset)",
    CLIPPING_NORM_BUDGET: "S = 0.25 (`--clipping-norm 0.25`)",
    LARGER_STEP_BUDGET: "S = 0.5, lr 1e-3 (`--lr 1e-3`)",
    NO_PRIVACY: "no clipping or noise",
}


@dataclass(frozen=True)
class DPScaleRun:
    """One finished run of the track.

    Attributes:
        preset: the preset (``dp-fedavg-competition``, ``fedavg``, ...).
        budget: ``eps1``, ``eps4``, ``eps8``, ``noprivacy`` or ``""`` (non-DP runs).
        seed: the training seed.
        val_anls: the checkpoint's ANLS on the whole val split.
        verified_epsilon: ``pflkit dp verify``'s RDP epsilon (``None`` without a declaration).
        noise_multiplier: sigma (``None`` without a declaration).
        total_bytes: all messages of the run.
        train_seconds: wall time of the rounds.
        noise_to_signal: mean over every client update of noise norm / clipped-sum norm.
        clipped_share: mean share of sampled providers whose update was clipped.
        update_norm: mean over every client update of its providers' median update norm
            (before clipping).
        curve: (round, val ANLS on the per-round questions) after each evaluated round.
    """

    preset: str
    budget: str
    seed: int
    val_anls: float
    verified_epsilon: float | None
    noise_multiplier: float | None
    total_bytes: int
    train_seconds: float
    noise_to_signal: float | None
    clipped_share: float | None
    update_norm: float | None
    curve: tuple[tuple[int, float], ...]


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def read_dp_scale_run(run: Path, preset: str, budget: str, seed: int) -> DPScaleRun:
    """The figures of one finished, scored run (``val.json`` written).

    Raises:
        FileNotFoundError: when the run is not finished or not scored.
    """
    submission = _json(run / "submission.json")
    rows = [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    updates = [client for row in rows for client in row.get("privacy", ())]
    verify = _json(run / "verify.json") if (run / "verify.json").is_file() else None
    declaration = _json(run / "privacy.json") if (run / "privacy.json").is_file() else None
    return DPScaleRun(
        preset=preset,
        budget=budget,
        seed=seed,
        val_anls=_json(run / "val.json")["anls"],
        verified_epsilon=None if verify is None else verify["epsilon"]["rdp"],
        noise_multiplier=None if declaration is None else declaration["noise_multiplier"],
        total_bytes=submission["total_bytes"],
        train_seconds=submission["timing"]["wall"],
        noise_to_signal=_mean(
            [
                u["dp_noise_norm"] / u["dp_clipped_sum_norm"]
                for u in updates
                if u["dp_clipped_sum_norm"] > 0
            ]
        ),
        clipped_share=_mean([u["dp_clipped_share"] for u in updates]),
        update_norm=_mean([u["dp_update_norm_median"] for u in updates]),
        curve=tuple((row["round"], row["val_anls"]) for row in rows if "val_anls" in row),
    )


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _group(runs: Sequence[DPScaleRun]) -> dict[tuple[str, str], list[DPScaleRun]]:
    groups: dict[tuple[str, str], list[DPScaleRun]] = {}
    for run in runs:
        groups.setdefault((run.preset, run.budget), []).append(run)
    return groups


def _figure(value: float | None) -> float | str:
    return "n/a" if value is None else value


def dp_scale_columns(seeds: Sequence[int]) -> tuple[Column, ...]:
    """The table's columns: a run, its privacy, a column per seed, then the summary."""
    return (
        text("run", "run"),
        text("epsilon", "epsilon (verified)"),
        number("sigma", "sigma"),
        *(number(f"seed_{s}", f"seed {s}") for s in seeds),
        number("mean", "mean"),
        number("spread", "spread"),
        number("mean_minus_base", "mean - base", "+.4f"),
        number("noise_to_signal", "noise / signal", ".1f"),
        number("clipped", "clipped", ".2f"),
        text("total_bytes", "total bytes", align="right"),
        text("train_wall", "train wall", align="right"),
    )


def dp_scale_table(
    runs: Sequence[DPScaleRun], base_anls: float | None, seeds: Sequence[int]
) -> Table:
    """One row per (preset, budget), a column per seed, mean, spread, against base."""
    columns = dp_scale_columns(seeds)
    rows: list[dict[str, float | str]] = []
    if base_anls is not None:
        rows.append(
            {**{c.key: "" for c in columns}, "run": "base (no training)", "mean": base_anls}
        )
    for (preset, budget), group in _group(runs).items():
        by_seed = {run.seed: run for run in group}
        scores = [run.val_anls for run in group]
        mean = statistics.fmean(scores)
        first = group[0]
        private = budget != NO_PRIVACY and first.noise_multiplier is not None
        verified = first.verified_epsilon
        rows.append(
            {
                "run": f"`{preset}`"
                + ("" if budget != NO_PRIVACY else " without clipping or noise"),
                "epsilon": f"{budget.removeprefix('eps')} ({verified:.3f})"
                if verified is not None and budget != NO_PRIVACY
                else "",
                "sigma": first.noise_multiplier if private else "",
                **{f"seed_{s}": by_seed[s].val_anls if s in by_seed else "" for s in seeds},
                "mean": mean,
                # max minus min over the seeds; a single seed has no spread to show
                "spread": max(scores) - min(scores) if len(scores) > 1 else "one seed",
                "mean_minus_base": "" if base_anls is None else mean - base_anls,
                "noise_to_signal": _figure(
                    _mean([r.noise_to_signal for r in group if r.noise_to_signal])
                ),
                "clipped": _figure(
                    _mean([r.clipped_share for r in group if r.clipped_share is not None])
                ),
                "total_bytes": format_bytes(first.total_bytes),
                "train_wall": f"{statistics.fmean(r.train_seconds for r in group) / 60:.1f} min",
            }
        )
    return Table(columns, rows)


#: The main table's columns, split in two for narrow pages: the scores, and the mechanism and cost.
ANLS_KEYS = ("run", "epsilon", "sigma", "mean", "spread", "mean_minus_base")
COST_KEYS = ("run", "epsilon", "noise_to_signal", "clipped", "total_bytes", "train_wall")


def anls_and_cost_tables(table: Table, seeds: Sequence[int]) -> tuple[Table, Table]:
    """:func:`dp_scale_table`'s table as two: the val ANLS of every seed with their mean, and the
    mechanism and cost (without the base's row, which has neither)."""
    anls_keys = (*ANLS_KEYS[:3], *(f"seed_{s}" for s in seeds), *ANLS_KEYS[3:])
    anls = table.select(anls_keys)
    cost = table.select(COST_KEYS)
    trained = [row for row in cost.rows if any(row[key] != "" for key in COST_KEYS[2:])]
    return anls, Table(cost.columns, trained, cost.note)


def clipping_table(runs: Sequence[DPScaleRun], base_anls: float | None) -> Table:
    """``dp-fedavg-competition`` at epsilon 8: the preset, S matched to the update, a larger
    step, and no clipping or noise (:data:`CLIPPING_ROWS`): each one's update norm, clipped
    share, noise to signal, the val ANLS of seeds 0 and 1 and their mean against the base."""
    columns = (
        text("row", "`dp-fedavg-competition`, epsilon 8"),
        number("update_norm", "update norm", ".3f"),
        number("clipped", "clipped", ".2f"),
        number("noise_to_signal", "noise / signal", ".1f"),
        number("seed_0", "seed 0"),
        number("seed_1", "seed 1"),
        number("mean_minus_base", "mean - base", "+.4f"),
    )
    groups = _group([r for r in runs if r.preset == "dp-fedavg-competition"])
    rows = []
    for budget, label in CLIPPING_ROWS.items():
        group = groups.get(("dp-fedavg-competition", budget))
        if not group:
            continue
        by_seed = {run.seed: run.val_anls for run in group}
        mean = statistics.fmean(by_seed.values())
        rows.append(
            {
                "row": label,
                "update_norm": _figure(_mean([r.update_norm for r in group if r.update_norm])),
                "clipped": _figure(
                    _mean([r.clipped_share for r in group if r.clipped_share is not None])
                ),
                "noise_to_signal": _figure(
                    _mean([r.noise_to_signal for r in group if r.noise_to_signal is not None])
                ),
                "seed_0": by_seed.get(0, ""),
                "seed_1": by_seed.get(1, ""),
                "mean_minus_base": "" if base_anls is None else mean - base_anls,
            }
        )
    return Table(columns, rows)


def plot_dp_scale(runs: Sequence[DPScaleRun], base_anls: float | None, target: Path) -> Path:
    """Val ANLS against epsilon: every seed a point, the mean a line, per preset; the base and
    the runs without privacy as horizontal lines."""
    figure, axes = new_figure()
    groups = _group(runs)
    for preset in dict.fromkeys(run.preset for run in runs if run.budget.startswith("eps")):
        points = [
            (int(budget.removeprefix("eps")), group)
            for (name, budget), group in groups.items()
            if name == preset and budget.startswith("eps")
        ]
        points.sort(key=lambda point: point[0])
        means = [(e, statistics.fmean(r.val_anls for r in group)) for e, group in points]
        (line,) = axes.plot(*zip(*means, strict=True), marker="o", label=preset)
        for epsilon, group in points:
            axes.scatter(
                [epsilon] * len(group),
                [r.val_anls for r in group],
                marker="x",
                color=line.get_color(),
            )
        free = groups.get((preset, NO_PRIVACY))
        if free:
            axes.axhline(
                statistics.fmean(r.val_anls for r in free),
                linestyle=":",
                color=line.get_color(),
                label=f"{preset}, no clipping or noise",
            )
    for (preset, budget), group in groups.items():
        if not budget:
            axes.axhline(
                statistics.fmean(r.val_anls for r in group),
                linestyle="-.",
                color="black",
                label=f"{preset} (no DP)",
            )
    if base_anls is not None:
        axes.axhline(base_anls, linestyle="--", color="grey", label="base")
    axes.set_xlabel("epsilon (delta 1e-5, provider level); x: a seed, line: the mean")
    axes.set_ylabel("validation ANLS (whole split)")
    axes.set_xticks(EPSILONS)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return save_figure(figure, target)


def plot_round_curves(runs: Sequence[DPScaleRun], base_anls: float | None, target: Path) -> Path:
    """Per-round val ANLS (the questions validated after each round) of every run that has it."""
    figure, axes = new_figure()
    for run in runs:
        if run.curve:
            label = f"{run.preset} {run.budget or 'no DP'} seed {run.seed}"
            axes.plot(*zip(*run.curve, strict=True), marker=".", label=label)
    if base_anls is not None:
        axes.axhline(base_anls, linestyle="--", color="grey", label="base (whole val)")
    axes.set_xlabel("round")
    axes.set_ylabel("val ANLS after the round (per-round questions)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="x-small")
    return save_figure(figure, target)
