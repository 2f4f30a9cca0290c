"""The experiments' tables (markdown) and plots (PNG) from their finished runs."""

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
from experiments.round_scores import RoundScore, first_at_threshold, read_round_scores
from experiments.scoring import full_val_report, score_personal


def track2_table(out: Path, fedavg: RunReport | None, methods: Sequence[str] = DP_METHODS) -> str:
    """Markdown: one row per DP method, one column per epsilon, FedAvg as the non-private row."""
    header = "| method | " + " | ".join(f"epsilon {e}" for e in EPSILONS) + " | non-private |"
    lines = [header, "| --- |" + " ---: |" * (len(EPSILONS) + 1)]
    for method in methods:
        cells = []
        for epsilon in EPSILONS:
            run = out / f"{method}-eps{epsilon}"
            if not (run / "val.json").is_file():
                cells.append("n/a")
                continue
            declaration = json.loads((run / "privacy.json").read_text(encoding="utf-8"))
            anls = full_val_report(run).val_anls
            cells.append(f"{anls:.4f} (sigma {declaration['noise_multiplier']:.3f})")
        lines.append(f"| `{method}` | " + " | ".join(cells) + " | |")
    if fedavg is not None:
        lines.append("| `fedavg` |" + " |" * len(EPSILONS) + f" {fedavg.val_anls:.4f} |")
    return "\n".join(lines) + "\n"


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


def optimiser_track1(
    out: Path, stated_threshold: float | None = None
) -> tuple[str, dict[str, list[RoundScore]]]:
    """Markdown: the round-by-round runs, each with its rounds and bytes to the threshold that
    the ``fedavg`` run's final test ANLS implies (95% of it), or to ``stated_threshold`` (the
    benchmark's) when ``fedavg`` was not run here."""
    scores = {e.name: read_round_scores(out / e.name) for e in OPTIMISER_TRACK1}
    fedavg = scores["fedavg"]
    threshold = threshold_from(fedavg[-1].test_anls) if fedavg else stated_threshold
    source = (
        "95% of fedavg's test ANLS after its last round"
        if fedavg
        else "the benchmark's, from benchmark.json"
    )
    lines = [
        f"threshold: {threshold} ({source})\n",
        "| run | val ANLS per round (whole split) | final val | final test | "
        "bytes/message | total bytes | round at threshold | bytes to threshold |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, rows in scores.items():
        if not rows:
            continue
        report = read_run(out / name)
        reached = None if threshold is None else first_at_threshold(rows, threshold)
        at = (
            ("not reached", "n/a")
            if reached is None
            else (str(reached.round), format_bytes(reached.total_bytes))
        )
        curve = ", ".join(_anls(row.val_anls) for row in rows)
        lines.append(
            f"| {name} | {curve} | {_anls(rows[-1].val_anls)} | {rows[-1].test_anls:.4f} | "
            f"{report.bytes_per_message:,} | {format_bytes(rows[-1].total_bytes)} | "
            f"{at[0]} | {at[1]} |"
        )
    return "\n".join(lines) + "\n", scores


def _anls(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def plot_round_scores(
    scores: dict[str, list[RoundScore]], target: Path, threshold: float | None = None
) -> Path:
    """Val (solid) and test (dashed) ANLS against cumulative bytes, the threshold as a line
    (``fedavg``'s when it is among the runs, else ``threshold``)."""
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
    if scores.get("fedavg"):
        threshold = threshold_from(scores["fedavg"][-1].test_anls)
    if threshold is not None:
        axes.axhline(threshold, color="grey", linestyle=":", label="track-1 threshold")
    axes.set_xlabel("bytes exchanged (both directions), one point per round")
    axes.set_ylabel("ANLS (whole split)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    return save_figure(figure, target)


def recipes_table(out: Path, threshold: float | None) -> str:
    """Markdown: each finished :data:`RECIPES` run, its bytes and scores against the threshold."""
    lines = [
        f"threshold: {threshold} (the benchmark's)\n",
        "| recipe | options | bytes/message | total bytes | val ANLS | test ANLS | "
        "reaches the threshold |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for experiment in RECIPES:
        run = out / experiment.name
        if not (run / "test.json").is_file():
            continue
        report = full_val_report(run)
        test = json.loads((run / "test.json").read_text(encoding="utf-8"))["anls"]
        reached = "n/a" if threshold is None else ("yes" if test >= threshold else "no")
        lines.append(
            f"| {experiment.name} | `{' '.join(experiment.options)}` | "
            f"{report.bytes_per_message:,} | {report.total_bytes:,} | "
            f"{report.val_anls:.4f} | {test:.4f} | {reached} |"
        )
    return "\n".join(lines) + "\n"


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
