"""The experiments' tables (:class:`~experiments.results_file.Table`) and plots (PNG) from their
finished runs."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from benchmark.figures import new_figure, save_figure
from benchmark.threshold import threshold_from
from experiments.catalog import DP_METHODS, EPSILONS, OPTIMISER_TRACK1, RECIPES, TRACK3
from experiments.personal_report import PersonalReport, read_personal
from experiments.report import RunReport, format_bytes, read_run
from experiments.results_file import Column, Table, code, number, text
from experiments.round_scores import RoundScore, first_at_threshold, read_round_scores
from experiments.scoring import full_val_report, score_personal

#: Track 2's table: a DP method per row, a column per epsilon (:func:`track2_table`).
TRACK2_COLUMNS: tuple[Column, ...] = (
    code("method", "method"),
    *(text(f"epsilon_{e}", f"epsilon {e}", align="right") for e in EPSILONS),
    number("non_private", "non-private"),
)


def track2_table(out: Path, fedavg: RunReport | None, methods: Sequence[str] = DP_METHODS) -> Table:
    """One row per DP method, one column per epsilon (val ANLS and sigma), FedAvg as the
    non-private row."""
    rows: list[dict[str, str | float]] = []
    for method in methods:
        row: dict[str, str | float] = {"method": method, "non_private": ""}
        for epsilon in EPSILONS:
            run = out / f"{method}-eps{epsilon}"
            if not (run / "val.json").is_file():
                row[f"epsilon_{epsilon}"] = "n/a"
                continue
            declaration = json.loads((run / "privacy.json").read_text(encoding="utf-8"))
            anls = full_val_report(run).val_anls
            row[f"epsilon_{epsilon}"] = f"{anls:.4f} (sigma {declaration['noise_multiplier']:.3f})"
        rows.append(row)
    if fedavg is not None and fedavg.val_anls is not None:
        rows.append(
            {
                "method": "fedavg",
                **{f"epsilon_{e}": "" for e in EPSILONS},
                "non_private": fedavg.val_anls,
            }
        )
    return Table(TRACK2_COLUMNS, rows)


def plot_anls_vs_epsilon(
    out: Path, fedavg: RunReport | None, target: Path, methods: Sequence[str] = DP_METHODS
) -> Path:
    """Val ANLS against epsilon, one line per DP method, FedAvg as a horizontal line."""
    figure, axes = new_figure()
    for method in methods:
        points = [
            (e, full_val_report(out / f"{method}-eps{e}").val_anls)
            for e in EPSILONS
            if (out / f"{method}-eps{e}" / "val.json").is_file()
        ]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=method)
    if fedavg is not None:
        axes.axhline(fedavg.val_anls, linestyle="--", color="grey", label="fedavg (no DP)")
    axes.set_xlabel("epsilon (delta 1e-5, provider level)")
    axes.set_ylabel("validation ANLS (whole split)")
    axes.set_xticks(EPSILONS)
    axes.grid(True, alpha=0.3)
    axes.legend()
    return save_figure(figure, target)


#: The round-by-round runs' table (:func:`optimiser_track1`).
ROUNDS_COLUMNS: tuple[Column, ...] = (
    text("run", "run"),
    text("val_anls_per_round", "val ANLS per round (whole split)"),
    text("test_anls_per_round", "test ANLS per round (whole split)"),
    number("final_val", "final val"),
    number("final_test", "final test"),
    number("bytes_per_message", "bytes/message", "int"),
    text("total_bytes", "total bytes", align="right"),
    number("round_at_threshold", "round at threshold", "int"),
    text("bytes_to_threshold", "bytes to threshold", align="right"),
)


def optimiser_track1(
    out: Path, stated_threshold: float | None = None
) -> tuple[Table, dict[str, list[RoundScore]]]:
    """The round-by-round runs, each with its rounds and bytes to ``stated_threshold`` (the
    benchmark's, which the evaluator applies: on ``mini`` the threshold in force), or, for a
    benchmark that states none, to the threshold that the ``fedavg`` run's final test ANLS
    implies (95% of it); the threshold is the table's note."""
    scores = {e.name: read_round_scores(out / e.name) for e in OPTIMISER_TRACK1}
    threshold = round_scores_threshold(scores, stated_threshold)
    source = (
        "the benchmark's, from benchmark.json"
        if stated_threshold is not None
        else "95% of fedavg's test ANLS after its last round"
    )
    rows: list[dict[str, str | float | int]] = []
    for name, runs in scores.items():
        if not runs:
            continue
        report = read_run(out / name)
        reached = None if threshold is None else first_at_threshold(runs, threshold)
        rows.append(
            {
                "run": name,
                "val_anls_per_round": ", ".join(_anls(run.val_anls) for run in runs),
                "test_anls_per_round": ", ".join(_anls(run.test_anls) for run in runs),
                "final_val": "n/a" if runs[-1].val_anls is None else runs[-1].val_anls,
                "final_test": runs[-1].test_anls,
                "bytes_per_message": report.bytes_per_message,
                "total_bytes": format_bytes(runs[-1].total_bytes),
                "round_at_threshold": "not reached" if reached is None else reached.round,
                "bytes_to_threshold": "n/a"
                if reached is None
                else format_bytes(reached.total_bytes),
            }
        )
    return Table(ROUNDS_COLUMNS, rows, f"threshold: {threshold} ({source})"), scores


def round_scores_threshold(
    scores: dict[str, list[RoundScore]], stated_threshold: float | None
) -> float | None:
    """The threshold the round-by-round table and plot count to: the benchmark's when it states
    one, else 95% of ``fedavg``'s final test ANLS when ``fedavg`` is among the runs."""
    if stated_threshold is not None:
        return stated_threshold
    fedavg = scores.get("fedavg")
    return threshold_from(fedavg[-1].test_anls) if fedavg else None


def _anls(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def plot_round_scores(
    scores: dict[str, list[RoundScore]], target: Path, threshold: float | None = None
) -> Path:
    """Val (solid) and test (dashed) ANLS against cumulative bytes, the threshold as a line
    (:func:`round_scores_threshold`: ``threshold``, the benchmark's, else ``fedavg``'s)."""
    figure, axes = new_figure()
    for name, rows in scores.items():
        if not rows:
            continue
        val = [(row.total_bytes, row.val_anls) for row in rows if row.val_anls is not None]
        (line,) = axes.plot(*zip(*val, strict=True), marker="o", label=f"{name} val")
        axes.plot(
            [row.total_bytes for row in rows],
            [row.test_anls for row in rows],
            linestyle="--",
            marker=".",
            color=line.get_color(),
            label=f"{name} test",
        )
    threshold = round_scores_threshold(scores, threshold)
    if threshold is not None:
        axes.axhline(threshold, color="grey", linestyle=":", label="track-1 threshold")
    axes.set_xlabel("bytes exchanged (both directions), one point per round")
    axes.set_ylabel("ANLS (whole split)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return save_figure(figure, target)


#: The 1,000x search's table (:func:`recipes_table`).
RECIPES_COLUMNS: tuple[Column, ...] = (
    text("recipe", "recipe"),
    code("options", "options"),
    number("bytes_per_message", "bytes/message", "int"),
    number("total_bytes", "total bytes", "int"),
    number("val_anls", "val ANLS"),
    number("test_anls", "test ANLS"),
    text("reaches_threshold", "reaches the threshold"),
)


def recipes_table(out: Path, threshold: float | None) -> Table:
    """Each finished :data:`RECIPES` run, its bytes and scores against the threshold."""
    rows: list[dict[str, str | float | int]] = []
    for experiment in RECIPES:
        run = out / experiment.name
        if not (run / "test.json").is_file():
            continue
        report = full_val_report(run)
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))["anls"]
        rows.append(
            {
                "recipe": experiment.name,
                "options": " ".join(experiment.options),
                "bytes_per_message": report.bytes_per_message,
                "total_bytes": report.total_bytes,
                "val_anls": "n/a" if report.val_anls is None else report.val_anls,
                "test_anls": test,
                "reaches_threshold": "n/a"
                if threshold is None
                else ("yes" if test >= threshold else "no"),
            }
        )
    return Table(RECIPES_COLUMNS, rows, f"threshold: {threshold} (the benchmark's)")


def track3(data: Path, out: Path, base: str) -> list[PersonalReport]:
    """Score base, fedavg (global only, from ``fedavg-ft``) and every trained track-3 run on
    the personal test splits; runs not (yet) trained are left out."""
    score_personal(out / "track3-base-seed0", base, data)
    reports = [read_personal(out / "track3-base-seed0")]
    fedavg_ft = out / TRACK3[0].name
    if (fedavg_ft / "submission.json").is_file():
        score_personal(out / "track3-fedavg-seed0", str(fedavg_ft / "checkpoint"), data)
        submission = json.loads((fedavg_ft / "submission.json").read_text(encoding="utf-8"))
        with (fedavg_ft / "communication_log.csv").open(encoding="utf-8") as stream:
            federated = sum(
                int(row["amount_of_bytes"])
                for row in csv.DictReader(stream)
                if int(row["federated_round"]) <= submission["rounds"]
            )
        timing = submission["timing"]
        reports.append(
            read_personal(
                out / "track3-fedavg-seed0",
                total_bytes=federated,
                wall_seconds=timing["wall"] - timing.get("personalisation", 0.0),
            )
        )
    for run in (out / experiment.name for experiment in TRACK3):
        if (run / "submission.json").is_file():
            score_personal(run, str(run / "checkpoint"), data)
            reports.append(read_personal(run))
    return reports
