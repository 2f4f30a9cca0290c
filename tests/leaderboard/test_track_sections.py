"""Each track's section opens with its description and links the participants' scoring page."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from benchmark.tracks import TRACKS
from evaluator.core.config import DEFAULT_DOCS_URL, Settings
from leaderboard.routes.pages import SCORING_PAGE

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_track_is_described_in_one_or_two_sentences() -> None:
    for track in TRACKS.values():
        sentences = re.findall(r"[.!?](?:\s|$)", track.description)
        assert 1 <= len(sentences) <= 2, (track.number, track.description)


def test_the_scoring_page_is_a_page_of_the_docs_site() -> None:
    assert SCORING_PAGE.endswith("/")
    assert (DOCS / SCORING_PAGE.rstrip("/")).with_suffix(".md").is_file()


def test_each_section_opens_with_its_description_and_the_scoring_link(served) -> None:
    page = httpx.get(served.url + "/leaderboard").text
    link = f'<a href="{DEFAULT_DOCS_URL}{SCORING_PAGE}">How a submission is scored</a>'
    for number, track in TRACKS.items():
        summary = re.search(rf'<p class="summary" id="track{number}-summary">(.*?)</p>', page)
        assert summary is not None, number
        assert unescape(summary.group(1)) == unescape(f"{track.description} {link}")
    # Track 2's rules sit folded under the summary, not as paragraphs before the plot.
    section = page[page.index('<section id="track2">') : page.index('id="plot-track2"')]
    assert re.sub(r"<details.*?</details>", "", section, flags=re.S).count("<p") == 2
    assert 'id="verification-covers"' in section and 'id="track2-checks"' in section


def test_the_scoring_link_opens_the_site_the_service_serves(served) -> None:
    page = httpx.get(served.url + "/leaderboard").text
    link = re.search(r'<a href="([^"]+)">How a submission is scored</a>', page)
    assert link is not None and link.group(1) == DEFAULT_DOCS_URL + SCORING_PAGE
    answer = httpx.get(served.url + link.group(1))
    assert answer.status_code == 200
    assert "<h1>How a submission is scored</h1>" in answer.text
    assert "script-src 'self' 'unsafe-inline'" in answer.headers["content-security-policy"]
    # the pages keep their own strict policy
    assert "default-src 'none'" in httpx.get(served.url + "/leaderboard").headers[
        "content-security-policy"]


def test_no_link_where_no_site_answers(tmp_path: Path) -> None:
    unbuilt = Settings(storage_dir=tmp_path, site_dir=tmp_path / "site")
    assert not unbuilt.serves_site and unbuilt.docs_link is None
    proxied = Settings(storage_dir=tmp_path, site_dir=None, docs_url="/site/")
    assert proxied.docs_link == "/site/"
    elsewhere = Settings(storage_dir=tmp_path, docs_url="https://example.org/kit")
    assert elsewhere.docs_link == "https://example.org/kit/"


@pytest.mark.parametrize(("given", "kept"), [("https://example.org/kit", "https://example.org/kit/"),
                                             ("/docs-site/", "/docs-site/")])  # fmt: skip
def test_the_docs_url_ends_with_a_slash(given: str, kept: str) -> None:
    assert Settings(docs_url=given).docs_url == kept


@pytest.mark.parametrize("bad", ["example.org/kit", "ftp://example.org/", "/my docs/"])
def test_a_docs_url_that_is_no_url_or_path_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="docs_url must be an http"):
        Settings(docs_url=bad)
