"""The web app that ``pflkit serve`` runs: the evaluator's API with the leaderboard's pages.

The two packages do not know each other's modules: the leaderboard reads the evaluator's
database and uses its dependencies, and this module, above both, mounts the leaderboard's router
on the evaluator's app. ``create_app`` and ``create_api`` are also uvicorn factories for
``pflkit serve --workers N`` (``pflkit.app:create_app``).
"""

from __future__ import annotations

from fastapi import FastAPI

from evaluator.core.config import Settings


def create_app(settings: Settings | None = None, *, migrate_database: bool = True) -> FastAPI:
    """The evaluator's API and the leaderboard's pages in one app.

    Args:
        settings: the configuration (read from the environment when omitted).
        migrate_database: bring the schema to the newest migration at start-up.

    Returns:
        The FastAPI application.
    """
    from evaluator.main import create_app as create_evaluator
    from leaderboard.fast_reads import add_fast_reads
    from leaderboard.reproduction_selection import select_reproductions
    from leaderboard.web import router, warm_views

    app = create_evaluator(settings, migrate_database=migrate_database, routers=(router,),
                           services=(warm_views, select_reproductions))  # fmt: skip
    add_fast_reads(app)
    return app


def create_api(settings: Settings | None = None, *, migrate_database: bool = True) -> FastAPI:
    """The evaluator's API alone (``pflkit serve --no-leaderboard``), with the leaderboard's
    selection of the top-k re-runs (``leaderboard.reproduction_selection``) but not its pages.

    Args:
        settings: the configuration (read from the environment when omitted).
        migrate_database: bring the schema to the newest migration at start-up.

    Returns:
        The FastAPI application.
    """
    from evaluator.main import create_app as create_evaluator
    from leaderboard.reproduction_selection import select_reproductions

    return create_evaluator(settings, migrate_database=migrate_database,
                            services=(select_reproductions,))  # fmt: skip
