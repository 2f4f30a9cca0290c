"""Every results table comes from a data file named on its page (docs/hooks/results_tables.py).

The scripts write the files (``experiments.results_file``); the hook renders each marker
``<!-- results-table: data/NAME.json -->`` into the table and its provenance line, and fails the
build on a missing or invalid file.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from experiments.results_file import Column, code, number, text, write_results_table

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A Markdown table: a line of cells followed by its alignment line.
TABLE = re.compile(r"^\|.*\|\s*\n\|(?:\s*:?-{3,}:?\s*\|)+\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    """The hook, loaded from its file as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location(
        "results_tables", DOCS / "hooks/results_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_page(hook: ModuleType, docs: Path, markdown: str, page: str = "results/page.md") -> str:
    """The page's Markdown after the hook, as MkDocs calls it."""
    fake = SimpleNamespace(file=SimpleNamespace(src_uri=page))
    return hook.on_page_markdown(markdown, page=fake, config={"docs_dir": str(docs)})


COLUMNS = (
    code("run", "run"),
    text("note", "what"),
    number("rounds", "rounds", "int"),
    number("anls", "val ANLS"),
    number("delta", "mean - base", "+.4f"),
    number("speed", "speed-up", ".2fx"),
)


def test_a_data_file_renders_as_its_table_with_its_provenance(
    hook: ModuleType, tmp_path: Path
) -> None:
    rows = [
        {"run": "fedavg", "note": "**best**", "rounds": 1200, "anls": 0.42951, "delta": 0.0412,
         "speed": 4.849},
        {"run": "", "note": "n/a", "rounds": "not reached", "anls": "", "delta": -0.00362,
         "speed": None},
    ]  # fmt: skip
    write_results_table(
        tmp_path / "results/data/runs.json", COLUMNS, rows, command="python -m x --y 1",
        date="2026-11-22", machine="2-core CPU", versions={"torch": "2.13.0"},
        note="threshold: 0.4156",
    )  # fmt: skip
    assert [path.name for path in (tmp_path / "results/data").iterdir()] == ["runs.json"]
    page = "# Runs\n\n<!-- results-table: data/runs.json -->\n\nDiscussion.\n"
    assert build_page(hook, tmp_path, page) == (
        "# Runs\n\nthreshold: 0.4156\n\n"
        "| run | what | rounds | val ANLS | mean - base | speed-up |\n"
        "| --- | --- | ---: | ---: | ---: | ---: |\n"
        "| `fedavg` | **best** | 1,200 | 0.4295 | +0.0412 | 4.85x |\n"
        "|  | n/a | not reached |  | -0.0036 |  |\n\n"
        "<small>Data: [`runs.json`](data/runs.json) · 2026-11-22 · machine: 2-core CPU · "
        "versions: torch 2.13.0 · command: `python -m x --y 1`</small>\n\nDiscussion.\n"
    )
    # from a page in another folder the link climbs to the file
    other = build_page(hook, tmp_path, page, page="participants/models.md")
    assert "[`runs.json`](../results/data/runs.json)" in other


def test_the_writer_fills_in_the_provenance(tmp_path: Path) -> None:
    path = write_results_table(tmp_path / "t.json", COLUMNS[:1], [{"run": "a"}], command="c")
    data = json.loads(path.read_text())
    assert data["date"] and "-core" in data["machine"] and data["command"] == "c"
    assert {"python", "torch"} <= set(data["versions"])
    assert data["columns"] == [{"key": "run", "label": "run", "align": "left", "format": "code"}]
    with pytest.raises(ValueError, match="row 0 has keys"):
        write_results_table(tmp_path / "u.json", COLUMNS, [{"run": "a"}], command="c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # nothing half-written


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (None, "No such file"),
        ({"date": "22 November"}, "not an ISO date"),
        ({"command": ""}, "no command"),
        ({"columns": [{"key": "run", "label": "run", "align": "left", "format": "%"}]},
         "unknown format '%'"),
        ({"columns": [{"key": "run", "label": "run", "align": "centre", "format": "text"}]},
         "align"),
        ({"rows": [{"run": "a", "other": 1}]}, "exactly the columns' keys"),
        ({"rows": [{"run": 1}]}, "is not a text of a text column"),
        ({"columns": [{"key": "run", "label": "run", "align": "right", "format": "int"}],
          "rows": [{"run": 0.5}]}, "not an integer"),
    ],
)  # fmt: skip
def test_a_missing_or_bad_data_file_fails_the_build_naming_it(
    hook: ModuleType, tmp_path: Path, change: dict | None, message: str
) -> None:
    if change is not None:
        data = {"date": "2026-11-22", "machine": "m", "versions": {}, "command": "c",
                "columns": [{"key": "run", "label": "run", "align": "left", "format": "text"}],
                "rows": [{"run": "a"}], **change}  # fmt: skip
        (tmp_path / "results/data").mkdir(parents=True)
        (tmp_path / "results/data/bad.json").write_text(json.dumps(data))
    with pytest.raises(PluginError, match=rf"results/page\.md: .*data/bad\.json: .*{message}"):
        build_page(hook, tmp_path, "<!-- results-table: data/bad.json -->\n")


def test_a_marker_with_a_typo_fails_the_build(hook: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="results/page.md: a results-table marker"):
        build_page(hook, tmp_path, "Text.\n\n<!-- results-table:data/runs.json -->\n")


def test_every_marker_names_a_valid_data_file_and_every_data_file_is_shown(
    hook: ModuleType,
) -> None:
    named = set()
    for page in sorted(DOCS.rglob("*.md")):
        markdown = page.read_text(encoding="utf-8")
        for name in hook.MARKER.findall(markdown):
            data = hook.load(DOCS / "results" / name)
            hook.render(data, name)  # every cell in its column's format
            named.add(name)
    files = {f"data/{path.name}" for path in (DOCS / "results/data").glob("*.json")}
    assert files and named == files


#: Pages outside docs/results/ whose measured tables have moved to data files.
MEASURED_PAGES = (
    "participants/runners-up.md",
    "participants/dp-scale.md",
    "participants/personal-methods.md",
    "participants/personalisation.md",
    "participants/privacy.md",
    "participants/model.md",
    "participants/gpus.md",
    "organisers/audit.md",
)


def test_no_results_page_holds_a_table_of_its_own() -> None:
    pages = [*sorted((DOCS / "results").glob("*.md")), *(DOCS / p for p in MEASURED_PAGES)]
    written = {page.name: TABLE.findall(page.read_text(encoding="utf-8"))
               for page in pages}  # fmt: skip
    assert written and not {name: tables for name, tables in written.items() if tables}
    # no page includes a table from a Markdown file of docs/results/ (the old snippets)
    assert not [page for page in DOCS.rglob("*.md") if '--8<-- "results/' in page.read_text()]


def test_the_hook_is_in_the_site_configuration() -> None:
    assert "  - docs/hooks/results_tables.py\n" in (ROOT / "mkdocs.yml").read_text()


def test_a_column_spec_is_what_the_hook_knows(hook: ModuleType) -> None:
    for fmt in ("text", "code", "int", ".4f", "+.4f", ".2fx"):
        assert hook.known_format(fmt), fmt
    assert not hook.known_format(".4") and not hook.known_format("bytes")
    assert Column("k", "K").align == "right"


def test_a_bench_run_recorded_twice_is_two_rows_of_one_shown_table(hook: ModuleType,
                                                                    tmp_path: Path) -> None:
    from bench.bench import record

    report = {"threads": 1, "kit_questions_per_second": 77.82,
              "reference_questions_per_second": 17.84, "speedup": 4.36, "speedup_cpu_time": 4.13,
              "differing_predictions": 0, "questions": 621, "kit_anls": 0.33435719,
              "load_average": 1.2}  # fmt: skip
    path = tmp_path / "results" / "data" / "speed.json"
    record(path, report, command="python -m bench.bench --threads 1")
    record(path, {**report, "threads": 2, "speedup": 4.41}, command="python -m bench.bench --threads 2")
    data = json.loads(path.read_text())
    assert [row["threads"] for row in data["rows"]] == [1, 2]
    assert data["command"] == "python -m bench.bench --threads 1; python -m bench.bench --threads 2"
    page = build_page(hook, tmp_path, "<!-- results-table: data/speed.json -->")
    assert "| 1 | 77.82 | 17.84 | 4.36x | 4.13x | 0 / 621 | 0.3344 | 1.2 |" in page
    assert "| 2 | 77.82 | 17.84 | 4.41x | 4.13x | 0 / 621 | 0.3344 | 1.2 |" in page
