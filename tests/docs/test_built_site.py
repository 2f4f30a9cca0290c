"""The built site as a reader sees it: ``mkdocs build --strict`` once, then every page's HTML.

A docstring written for Sphinx (``:class:`X```) or a table cell's escaped pipe inside code
(``\\|``) builds without a warning but shows its markup to the reader; so does a doctest that
mkdocstrings did not turn into a code block. The REST API page must list every route the
service answers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPHINX_ROLE = re.compile(r":(?:class|meth|func|mod|attr|exc|data|obj|ref):")
# FastAPI's own pages, which the REST API page's introduction names instead of listing.
FASTAPI_PAGES = {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


class PageText(HTMLParser):
    """A page's visible text in two parts: prose (outside ``<code>`` and ``<pre>``) and inline
    code (inside ``<code>``, outside ``<pre>``); scripts and styles are left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.prose: list[str] = []
        self.inline_code: list[str] = []
        self._open = {"code": 0, "pre": 0, "script": 0, "style": 0}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._open:
            self._open[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        if self._open.get(tag):
            self._open[tag] -= 1

    def handle_data(self, data: str) -> None:
        if self._open["pre"] or self._open["script"] or self._open["style"]:
            return
        (self.inline_code if self._open["code"] else self.prose).append(data)


def page_text(page: Path) -> PageText:
    """The parsed text of one built page."""
    parser = PageText()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the module, strictly (a warning fails the build)."""
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-6000:]
    return folder


@pytest.fixture(scope="module")
def pages(site: Path) -> dict[str, PageText]:
    """Every built HTML page's text, by its path in the site."""
    return {str(page.relative_to(site)): page_text(page) for page in sorted(site.rglob("*.html"))}


def test_the_checks_see_what_a_reader_sees() -> None:
    parser = PageText()
    parser.feed("<p>See :class:`Foo` and <code>a \\| b</code>.</p><pre><code>:meth: \\|</code></pre>"
                "<script>x = ':func:'</script>")  # fmt: skip
    assert SPHINX_ROLE.findall(" ".join(parser.prose)) == [":class:"]
    assert parser.inline_code == ["a \\| b"]


def test_the_site_has_its_pages(pages: dict[str, PageText]) -> None:
    for page in ("index.html", "reference/rest-api/index.html", "reference/cli/index.html"):
        assert page in pages


def test_no_page_shows_a_sphinx_role(pages: dict[str, PageText]) -> None:
    shown = {name: SPHINX_ROLE.findall(" ".join(text.prose + text.inline_code))
             for name, text in pages.items()}  # fmt: skip
    assert not {name: roles for name, roles in shown.items() if roles}


def test_no_page_shows_an_escaped_pipe(pages: dict[str, PageText]) -> None:
    shown = [name for name, text in pages.items() if "\\|" in "".join(text.prose + text.inline_code)]
    assert not shown


def test_no_doctest_renders_as_prose(pages: dict[str, PageText]) -> None:
    shown = [name for name, text in pages.items() if ">>> " in "".join(text.prose)]
    assert not shown


def service_routes(storage: Path) -> set[str]:
    """``METHOD path`` of every route ``pflkit serve``'s app answers, less FastAPI's pages."""
    from fastapi.routing import iter_route_contexts

    from evaluator.core.config import Settings
    from pflkit.app import create_app

    app = create_app(Settings(storage_dir=storage), migrate_database=False)
    return {f"{method} {route.path}"
            for route in iter_route_contexts(app.routes)
            if route.methods and route.path not in FASTAPI_PAGES
            for method in route.methods if method != "HEAD"}  # fmt: skip


def test_the_rest_api_page_lists_every_route(pages: dict[str, PageText], tmp_path: Path) -> None:
    routes = service_routes(tmp_path / "storage")
    assert {"POST /api/v1/submissions", "GET /readyz", "GET /api/v1/leaderboard"} <= routes
    listed = set(pages["reference/rest-api/index.html"].inline_code)
    assert not routes - listed, "routes missing from docs/reference/rest-api.md"


def test_the_files_page_lists_every_upload_part_with_its_limit(pages: dict[str, PageText]) -> None:
    from benchmark.submission_contract import PARTS

    shown = set(pages["reference/files/index.html"].inline_code)
    for part in PARTS.values():
        assert {part.run_path, part.stored_name, part.limit_setting} <= shown, part.name


def test_the_files_page_shows_every_key_of_each_file(pages: dict[str, PageText]) -> None:
    from dataclasses import fields

    from accountant.declaration import FIELDS
    from baselines.core.communication_log import MessageRecord
    from benchmark.communication_log import HEADER
    from benchmark.recipe import Recipe
    from evaluator.submission_metadata import OTHER_KEYS, SubmissionMetadata

    shown = set(pages["reference/files/index.html"].inline_code)
    keys = {*SubmissionMetadata.model_fields, *(key for keys in OTHER_KEYS for key in keys),
            *FIELDS, *HEADER, *(field.name for field in fields(MessageRecord)),
            *(field.metadata["key"] for field in fields(Recipe)), "personal.log_round"}  # fmt: skip
    assert not keys - shown, "keys missing from docs/reference/files.md"


def test_every_results_table_shows_its_data_file_and_provenance(pages: dict[str, PageText]) -> None:
    marker = re.compile(r"^<!-- results-table: data/(\S+) -->$", re.MULTILINE)
    shown = 0
    for source in sorted((ROOT / "docs").rglob("*.md")):
        files = marker.findall(source.read_text(encoding="utf-8"))
        if not files:
            continue
        page = source.relative_to(ROOT / "docs").with_suffix("")
        built = page.parent if page.name == "index" else page
        text = pages[str(built / "index.html")]
        notes = [p for p in "".join(text.prose).split("Data: ")[1:] if " · machine: " in p]
        assert len(notes) == len(files), source
        assert set(files) <= set(text.inline_code), source  # each note names its file
        shown += len(files)
    assert shown >= 40


def test_every_reference_figure_shows_its_value(pages: dict[str, PageText]) -> None:
    """No page shows a figure marker (docs/hooks/reference_figures.py): the threshold in force,
    quoted on the FAQ, reads as its value."""
    shown = [name for name, text in pages.items()
             if "{{ figure." in "".join(text.prose + text.inline_code)]  # fmt: skip
    assert not shown
    rows = json.loads((ROOT / "docs/results/data/reference_figures.json").read_text())["rows"]
    threshold = next(row["value"] for row in rows if row["name"] == "threshold")
    assert f"that is {threshold}" in " ".join("".join(pages["faq/index.html"].prose).split())
