"""The figures pages quote in prose have one value, held in one file (docs/hooks/reference_figures.py).

``docs/results/data/reference_figures.json`` holds each figure once with its source; a page
quotes it as a marker that the hook replaces with the value. These tests check the hook, that
every marker names a figure, that each figure equals the data file or page it comes from, and
that no page (nor the README, which MkDocs does not build) writes one of the values where it
means the figure.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DATA = DOCS / "results/data"

#: Pages that write a figure's value literally because they are where it is measured.
SOURCE_PAGES = {
    "base_val_anls": {"participants/model.md"},  # the table of the base's scores
    "base_test_anls": {"participants/model.md"},
}
#: Where a value is written for another reason than quoting the figure: (page, the text around
#: it). A figure's value may be a measurement that happens to be equal, or a page that is not
#: this change's to edit.
ALLOWED = {
    "base_val_anls": [
        # the device bench's own measurements on the H200 machine (devicebench_h200.json),
        # per device and precision: equal to the reference, but a row of that table
        ("participants/gpus.md", "| CPU fp32, 16 threads | 0.3341 |"),
        ("participants/gpus.md", "| CUDA fp32 | 0.3341 |"),
        ("participants/gpus.md", "(ANLS 0.3351 against 0.3341)"),
    ],
    "vt5_base_parameters": [
        # the memory bench's checkpoint, described on its own results page (edited apart)
        ("results/memory.md", "336,142,080 parameters, `lm_head` untied"),
    ],
}


def load_hook(name: str) -> ModuleType:
    """A hook, loaded from its file as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location(name, DOCS / f"hooks/{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    return load_hook("reference_figures")


@pytest.fixture(scope="module")
def figures(hook: ModuleType) -> dict[str, str]:
    return hook.load(DOCS / hook.FIGURES)


def build_page(hook: ModuleType, docs: Path, markdown: str, page: str = "participants/x.md") -> str:
    """The page's Markdown after the hook, as MkDocs calls it."""
    fake = SimpleNamespace(file=SimpleNamespace(src_uri=page))
    return hook.on_page_markdown(markdown, page=fake, config={"docs_dir": str(docs)})


def write_figures(docs: Path, rows: list[Any]) -> None:
    path = docs / "results/data/reference_figures.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": rows}), encoding="utf-8")


def test_a_marker_becomes_the_figure_s_value(hook: ModuleType, tmp_path: Path) -> None:
    write_figures(tmp_path, [{"name": "threshold", "value": "0.4156", "what": "w"},
                             {"name": "parameters", "value": "336,142,080"}])  # fmt: skip
    page = ("The threshold is **{{ figure.threshold }}**.\n\n"
            "| model | parameters |\n| --- | ---: |\n| VT5 | {{ figure.parameters }} |\n\n"
            "It prints `{{ figure.threshold }}`.\n")  # fmt: skip
    assert build_page(hook, tmp_path, page) == (
        "The threshold is **0.4156**.\n\n"
        "| model | parameters |\n| --- | ---: |\n| VT5 | 336,142,080 |\n\n"
        "It prints `0.4156`.\n"
    )
    assert build_page(hook, tmp_path, "No figure, {braces} and {{ other }}.\n") == (
        "No figure, {braces} and {{ other }}.\n"
    )


@pytest.mark.parametrize(
    ("markdown", "message"),
    [
        ("The {{ figure.threshold_old }}.", "x.md: no reference figure 'threshold_old'"),
        ("The {{figure.threshold}}.", "x.md: a figure marker is not"),
        ("The {{ figure.Threshold }}.", "x.md: a figure marker is not"),
    ],
)
def test_an_unknown_or_malformed_marker_fails_the_build(
    hook: ModuleType, tmp_path: Path, markdown: str, message: str
) -> None:
    write_figures(tmp_path, [{"name": "threshold", "value": "0.4156"}])
    with pytest.raises(PluginError, match=message):
        build_page(hook, tmp_path, markdown)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"name": "a", "value": "1"}, {"name": "a", "value": "2"}], "named twice"),
        ([{"name": "A b", "value": "1"}], "not a lower-case identifier"),
        ([{"name": "a", "value": 0.4156}], "not a non-empty text"),
    ],
)
def test_a_bad_figures_file_fails_the_build(
    hook: ModuleType, tmp_path: Path, rows: list[Any], message: str
) -> None:
    write_figures(tmp_path, rows)
    with pytest.raises(PluginError, match=message):
        build_page(hook, tmp_path, "{{ figure.a }}")


def test_the_hook_runs_after_the_results_tables() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    tables = config.index("  - docs/hooks/results_tables.py\n")
    assert config.index("  - docs/hooks/reference_figures.py\n") > tables


def pages() -> dict[str, str]:
    """Every page of the site's sources, by its path under docs/."""
    return {page.relative_to(DOCS).as_posix(): page.read_text(encoding="utf-8")
            for page in sorted(DOCS.rglob("*.md"))}  # fmt: skip


def test_every_marker_names_a_figure(hook: ModuleType, figures: dict[str, str]) -> None:
    texts = pages() | {path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8")
                       for path in sorted(DATA.glob("*.json"))}  # fmt: skip
    used = {name for text in texts.values() for name in hook.MARKER.findall(text)}
    assert used and used <= set(figures), used - set(figures)
    leftover = {page for page, text in texts.items()
                if hook.LEFT_OVER.search(hook.MARKER.sub("", text))}  # fmt: skip
    assert not leftover
    # every figure is quoted somewhere (a figure no page quotes does not belong here)
    assert set(figures) - used == set()


def occurs(value: str, text: str) -> bool:
    """Whether ``value`` is written in ``text`` as a figure of its own (not inside a longer
    number)."""
    return re.search(rf"(?<![\d.,]){re.escape(value)}(?![\d]|[.,]\d)", text) is not None


def test_occurs_finds_a_figure_not_a_longer_number() -> None:
    assert occurs("0.4156", "is 0.4156.") and occurs("0.4156", "(0.4156, 0.4142)")
    assert not occurs("0.4156", "0.41567") and not occurs("0.4156", "10.4156")
    assert not occurs("67,136", "1,067,136") and not occurs("2.811", "2.8110")


def test_no_page_writes_a_figure_instead_of_its_marker(figures: dict[str, str]) -> None:
    written = []
    for page, text in pages().items():
        for name, value in figures.items():
            if page in SOURCE_PAGES.get(name, ()):
                continue
            for allowed_page, context in ALLOWED.get(name, ()):
                if allowed_page == page:
                    text = text.replace(context, "")
            if occurs(value, text):
                written.append(f"{page}: {value} ({name})")
    assert not written


def test_the_readme_quotes_only_the_figures_values(figures: dict[str, str]) -> None:
    """The README is not built by MkDocs: any 4-decimal score, and any count of bytes or
    parameters, it quotes is one of the reference figures' values (it quotes none today)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    values = {part for value in figures.values() for part in value.split(" to ")}
    scores = re.findall(r"(?<![\d.])0\.\d{4}(?!\d)", readme)
    counts = re.findall(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+) (?:bytes|parameters)", readme)
    quoted = set(scores) | set(counts)
    assert quoted <= values, quoted - values


def data(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def only(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    """The one row whose cells equal ``match``."""
    found = [row for row in rows if all(row[key] == value for key, value in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_each_figure_equals_its_source(figures: dict[str, str]) -> None:
    from benchmark.threshold import MEASURED_FEDAVG_TEST_ANLS, threshold_from
    from benchmark.tracks import COMMUNICATION

    threshold = only(data("threshold.json")["rows"], fedavg="the official recipe (in force)")
    assert figures["threshold"] == threshold["threshold_95_of_test"].strip("*")
    measured = MEASURED_FEDAVG_TEST_ANLS[("mini", 0)]["fedavg_test_anls"]
    assert figures["threshold"] == f"{threshold_from(measured):.4f}"
    assert threshold["test_anls_1_015_questions"] == f"{figures['fedavg_test_anls']} ({measured})"
    assert figures["fedavg_val_anls"] == f"{threshold['val_anls_621_questions']:.4f}"
    assert figures["real_data_threshold"] == f"{COMMUNICATION.threshold:.4f}"

    base = data("base_mini.json")["rows"]  # the table of participants/model.md
    assert only(base, split="val", questions="621")["anls"] == figures["base_val_anls"]
    assert only(base, split="test", questions="1,015")["anls"] == figures["base_test_anls"]
    older = data("threshold_fedavg_val.json")["rows"]
    track1_fedavg = only(data("track1.json")["rows"], run="fedavg")
    assert f"{only(older, measured='2026-11-27')['val_anls']:.4f}" == (
        f"{track1_fedavg['val_anls']:.4f}"
    )

    vt5 = only(data("family_sizes.json")["rows"], family="vt5", method="fedavg (full)")
    assert figures["vt5_base_parameters"] == f"{vt5['parameters']:,}"

    ceilings = data("audit_fdp_ceiling.json")["rows"]
    membership = only(ceilings, canaries=100, kind="membership (k = 2)")
    reconstruction = only(ceilings, canaries=100, kind="reconstruction (k = 10)")
    assert figures["audit_snj_ceiling_100"] == f"{membership['snj_plans']:.3f}"
    assert figures["audit_fdp_ceiling_100"] == membership["fdp_plans"].split()[0]
    assert figures["audit_reconstruction_ceiling_100"] == reconstruction["fdp_plans"].split()[0]

    # the demo's range is the runs of the results index's "same run on two machines"
    index = (DOCS / "results/index.md").read_text(encoding="utf-8")
    same_run = index[index.index("## The same run on two machines") :]
    low, high = figures["demo_lora_nf4_test_anls"].split(" to ")
    assert occurs(low, same_run) and occurs(high, same_run) and low < high
