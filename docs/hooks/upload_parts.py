"""MkDocs hook: the upload parts of a submission, from the submission contract, built when the
site is.

The ``<!-- upload-parts -->`` line of ``docs/reference/files.md`` is replaced by one row per
part of ``benchmark.submission_contract.PARTS``: where a run directory holds it, the name the
evaluator stores it under, the Content-Type ``pflkit submit`` sends, the evaluator setting that
bounds its size with that setting's default, and the tracks (``benchmark.tracks``) that need it.
A part, a limit or a track that changes changes the page.
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

PAGE = "reference/files.md"
MARKER = "<!-- upload-parts -->"


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Replace the files page's marker with the generated table of upload parts."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} lost its {MARKER} line: the table of upload parts goes there")
    return markdown.replace(MARKER, parts_table())


def parts_table() -> str:
    """The Markdown table of the upload parts."""
    from benchmark.submission_contract import PARTS
    from benchmark.tracks import TRACKS
    from evaluator.core.config import Settings

    limits = Settings.model_fields
    rows = ["| part (form field) | in `RUN_DIR` | stored as | Content-Type | size limit (setting, "
            "default) | tracks |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for part in PARTS.values():
        tracks = ", ".join(str(n) for n, track in sorted(TRACKS.items()) if part.name in track.parts)
        name = f"`{part.name}_{{k}}` (one a client)" if part.per_client else f"`{part.name}`"
        per_file = " a file" if part.per_client else ""
        limit = f"`{part.limit_setting}`, {limits[part.limit_setting].default:,} bytes{per_file}"
        rows.append(f"| {name} | `{part.run_path}` | `{part.stored_name}` | `{part.content_type}` "
                    f"| {limit} | {tracks or 'optional, any track'} |")  # fmt: skip
    return "\n".join(rows) + "\n"
