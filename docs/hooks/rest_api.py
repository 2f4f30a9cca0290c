"""MkDocs hook: the REST API reference (``docs/reference/rest-api.md``) from the app that
``pflkit serve`` runs, built when the site is.

The page's ``<!-- rest-api -->`` line is replaced by the endpoints of the app's OpenAPI schema
(``FastAPI.openapi()``) and the routes it leaves out of the schema, so the page cannot drift from
the service. Building the schema needs neither a database nor a network: the app is created on a
temporary storage folder (its SQLite files are created, never connected to) and never started.
Who may call each route is read from its dependencies (``evaluator.api.deps``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page
from openapi_markdown import Auth, HiddenRoute, render

PAGE = "reference/rest-api.md"
MARKER = "<!-- rest-api -->"
TEAM = Auth("a team's token (bearer; an organiser's token too)",
            {"401": "missing or unknown token", "429": "too many failed authentications from "
             "this address: wait for `Retry-After`"})  # fmt: skip
ORGANISER = Auth("an organiser's token (bearer)",
                 {**TEAM.statuses, "403": "a participant's token"})  # fmt: skip
ORGANISER_SESSION = Auth("an organiser's token (bearer) or the organiser page's signed-in session",
                         {"401": "no organiser credentials", "429": TEAM.statuses["429"]})  # fmt: skip
PUBLIC = Auth("none", {})


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Replace the REST API page's marker with the generated reference."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} lost its {MARKER} line: the generated reference goes there")
    return markdown.replace(MARKER, reference())


def reference() -> str:
    """The generated Markdown of the REST API reference."""
    with tempfile.TemporaryDirectory(prefix="pflkit-openapi-") as folder:
        app = build_app(Path(folder))
        schema = app.openapi()
        routes = list(service_routes(app))
    auths = {(method, route.path): auth_of(route)
             for route in routes if route.include_in_schema for method in route.methods}  # fmt: skip
    hidden = [HiddenRoute(method, route.path, route.endpoint.__doc__ or "", auth_of(route).text)
              for route in routes if not route.include_in_schema
              for method in sorted(route.methods)]  # fmt: skip
    return render(schema, auths, hidden)


def build_app(folder: Path) -> Any:
    """``pflkit serve``'s app (the API and the leaderboard's pages) on the default settings and
    a storage folder of its own, whatever ``PFLKIT_EVALUATOR_*`` the builder's shell holds."""
    from evaluator.core.config import Settings
    from pflkit.app import create_app

    class DefaultSettings(Settings):
        """The settings' defaults: the environment and any ``.env`` file are not read."""

        @classmethod
        def settings_customise_sources(cls, settings_cls: Any, init_settings: Any,
                                       **_: Any) -> tuple[Any, ...]:  # fmt: skip
            return (init_settings,)

    return create_app(DefaultSettings(storage_dir=folder / "storage"), migrate_database=False)


def service_routes(app: Any) -> Iterator[Any]:
    """The app's routes, those of routers it includes too, less FastAPI's own pages (the
    schema, ``/docs``, ``/redoc``), which the page's introduction names."""
    from fastapi.routing import iter_route_contexts

    own = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    for route in iter_route_contexts(app.routes):
        if route.path not in own and route.methods:  # a mounted app has no methods of its own
            yield route


def auth_of(route: Any) -> Auth:
    """What a route asks of its caller, from the dependencies it declares."""
    from evaluator.api import deps

    calls = list(dependency_calls(route.dependant))
    if deps.require_organiser in calls:
        return ORGANISER_SESSION
    if deps.organiser in calls:
        return ORGANISER
    if deps.current_team in calls or any(type(call).__name__ == "HTTPBearer" for call in calls):
        return TEAM
    return PUBLIC


def dependency_calls(dependant: Any) -> Iterator[Any]:
    """Every callable a route depends on, directly or through another dependency."""
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from dependency_calls(dependency)
