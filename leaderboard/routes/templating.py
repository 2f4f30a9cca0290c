"""The pages' Jinja templates (``leaderboard/templates``) with the kit's number formats."""

from __future__ import annotations

from pathlib import Path

from fastapi.templating import Jinja2Templates

from leaderboard import formatting

PACKAGE_DIR = Path(__file__).resolve().parent.parent

templates = Jinja2Templates(directory=str(PACKAGE_DIR / "templates"))
templates.env.filters.update(
    bytes=formatting.human_bytes, score=formatting.score, when=formatting.when,
    figure=lambda value, figure: formatting.figure_value(figure, value),
)  # fmt: skip
