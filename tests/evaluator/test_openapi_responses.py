"""The OpenAPI schema lists the errors the routes really answer, not only success and 422.

The schema is the one the REST API page is built from (docs/hooks/rest_api.py: ``build_app``,
``service_routes``, ``auth_of``). From it: every operation behind a token documents 401 and 429,
every operation behind an organiser's token 403, every path with a submission id 404, and every
operation that reads the database 503 (``evaluator.api.errors``). Then each code, answered by
the real app (FastAPI's ``TestClient``, no server, no worker), is in its operation's schema.

The app is the hook's, on a SQLite file migrated here, with teams made here: the evaluator's
``settings``/``teams`` fixtures (conftest.py) would also build a tiny VT5 reference and run on
PostgreSQL, which none of these answers needs.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.testclient import TestClient

from evaluator import crud
from evaluator.api import deps
from evaluator.core.db import migrate, session_scope

HOOKS = Path(__file__).resolve().parents[2] / "docs" / "hooks"
#: operations that read the database without a dependency that says so, and how
READS_WITHOUT_A_DEPENDENCY = {
    ("GET", "/api/v1/leaderboard"): "the board version (leaderboard.views.served_view)",
    ("GET", "/api/v1/leaderboard.csv"): "the board version (leaderboard.views.served_view)",
    ("GET", "/leaderboard"): "the board version (leaderboard.views.served_view)",
}
#: operations that never read the database, and why (none yet: a new route must be decided)
NO_DATABASE: dict[tuple[str, str], str] = {}


def load_rest_api_hook() -> ModuleType:
    """docs/hooks/rest_api.py as MkDocs loads it: its folder on ``sys.path``, for its sibling
    ``openapi_markdown``."""
    if str(HOOKS) not in sys.path:
        sys.path.insert(0, str(HOOKS))
    spec = importlib.util.spec_from_file_location("rest_api_hook", HOOKS / "rest_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Operation:
    """One operation of the schema with the route that answers it."""

    method: str
    path: str
    route: APIRoute
    auth: Any  # the hook's Auth
    codes: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    return load_rest_api_hook()


@pytest.fixture(scope="module")
def operations(hook: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[Operation]:
    """Every operation of the schema the REST API page shows."""
    app = hook.build_app(tmp_path_factory.mktemp("openapi"))
    schema = app.openapi()
    routes = {(method, route.path): route for route in hook.service_routes(app)
              if route.include_in_schema for method in route.methods}  # fmt: skip
    found = [Operation(method.upper(), path, routes[(method.upper(), path)],
                       hook.auth_of(routes[(method.upper(), path)]), frozenset(item["responses"]))
             for path, methods in schema["paths"].items()
             for method, item in methods.items()]  # fmt: skip
    assert len(found) >= 12, "the schema lost operations"
    return found


def reads_database(hook: ModuleType, operation: Operation) -> bool:
    """Whether the operation reads the database: a session dependency (the token checks depend
    on one), a bearer token the route looks up itself, or a listed exception."""
    calls = list(hook.dependency_calls(operation.route.dependant))
    return (
        deps.get_session in calls
        or any(isinstance(call, HTTPBearer) for call in calls)
        or (operation.method, operation.path) in READS_WITHOUT_A_DEPENDENCY
    )


def test_every_operation_behind_a_token_documents_401_and_429(
    hook: ModuleType, operations: list[Operation]
) -> None:
    guarded = [op for op in operations if op.auth in (hook.TEAM, hook.ORGANISER,
                                                      hook.ORGANISER_SESSION)]  # fmt: skip
    assert len(guarded) >= 7
    missing = {op.name: sorted({"401", "429"} - op.codes) for op in guarded}
    assert not {name: codes for name, codes in missing.items() if codes}


def test_organiser_token_operations_document_403_and_session_ones_do_not(
    hook: ModuleType, operations: list[Operation]
) -> None:
    """``deps.organiser`` refuses a participant's token 403; ``require_organiser`` (token or
    sign-in session) answers it 401, as a missing credential."""
    by_token = [op for op in operations if op.auth == hook.ORGANISER]
    by_session = [op for op in operations if op.auth == hook.ORGANISER_SESSION]
    assert by_token and by_session
    assert [op.name for op in by_token if "403" not in op.codes] == []
    assert [op.name for op in by_session if "403" in op.codes] == []


def test_every_path_with_a_submission_id_documents_404(operations: list[Operation]) -> None:
    with_id = [op for op in operations if "{submission_id}" in op.path]
    assert len(with_id) >= 4
    assert [op.name for op in with_id if "404" not in op.codes] == []


def test_every_operation_that_reads_the_database_documents_503(
    hook: ModuleType, operations: list[Operation]
) -> None:
    reading = [op for op in operations if reads_database(hook, op)]
    undecided = [op.name for op in operations
                 if op not in reading and (op.method, op.path) not in NO_DATABASE]  # fmt: skip
    assert undecided == [], "say whether these read the database (READS_WITHOUT_A_DEPENDENCY)"
    assert [op.name for op in reading if "503" not in op.codes] == []


# -- the codes, answered by the real app ---------------------------------------------------


@dataclass
class Service:
    """The hook's app on a migrated SQLite file, its schema and the teams' tokens."""

    app: Any
    client: TestClient
    schema: dict[str, Any]
    tokens: dict[str, str]

    def documents(self, method: str, path: str, code: int) -> bool:
        """Whether the schema lists ``code`` for the operation at the path template ``path``."""
        return str(code) in self.schema["paths"][path][method.lower()]["responses"]


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def service(hook: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Service:
    app = hook.build_app(tmp_path_factory.mktemp("service"))
    url = app.state.settings.db_url
    migrate(url)
    with session_scope(url) as session:
        tokens = {name: crud.create_team(session, name=name, organiser=organiser)[1]
                  for name, organiser in (("alpha", False), ("org", True))}  # fmt: skip
    return Service(app, TestClient(app), app.openapi(), tokens)


@pytest.mark.parametrize(
    ("method", "path", "template", "caller", "body", "code"),
    [
        ("GET", "/api/v1/submissions", "/api/v1/submissions", None, None, 401),
        # a participant's token where an organiser's token or session is needed: 401, not 403
        ("POST", "/api/v1/leaderboard/submissions/unknown/hide",
         "/api/v1/leaderboard/submissions/{submission_id}/{action}", "alpha", None, 401),
        ("GET", "/metrics", "/metrics", "alpha", None, 403),
        ("GET", "/api/v1/submissions/unknown", "/api/v1/submissions/{submission_id}", "alpha",
         None, 404),
        ("POST", "/api/v1/submissions/unknown/rescore",
         "/api/v1/submissions/{submission_id}/rescore", "org", None, 404),
        ("POST", "/api/v1/leaderboard/submissions/unknown/hide",
         "/api/v1/leaderboard/submissions/{submission_id}/{action}", "org", None, 404),
        ("GET", "/leaderboard/submissions/unknown", "/leaderboard/submissions/{submission_id}",
         None, None, 404),
        ("POST", "/api/v1/teams", "/api/v1/teams", "org", {"name": "alpha"}, 409),
    ],
)  # fmt: skip
def test_an_answered_code_is_documented(
    service: Service, method: str, path: str, template: str, caller: str | None,
    body: dict[str, Any] | None, code: int,
) -> None:  # fmt: skip
    token = service.tokens[caller] if caller else None
    answer = service.client.request(method, path, headers=bearer(token), json=body)
    assert answer.status_code == code, answer.text
    assert service.documents(method, template, code)


def test_a_throttled_address_gets_429_and_it_is_documented(service: Service) -> None:
    # An address of its own: the other tests' client keeps its count at zero.
    client = TestClient(service.app, client=("192.0.2.7", 50000))
    for _ in range(service.app.state.settings.auth_failures_allowed):
        assert client.get("/api/v1/submissions", headers=bearer("guessed")).status_code == 401
    answer = client.get("/api/v1/submissions", headers=bearer(service.tokens["alpha"]))
    assert answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1
    assert service.documents("GET", "/api/v1/submissions", 429)


@pytest.mark.parametrize(
    ("path", "caller"), [("/api/v1/submissions", "some token"), ("/healthz", None)]
)
def test_an_unavailable_database_gets_503_and_it_is_documented(
    hook: ModuleType, tmp_path: Path, path: str, caller: str | None
) -> None:
    """A database file that cannot be opened (a folder stands in its place) is unavailable."""
    app = hook.build_app(tmp_path)
    database = Path(app.state.settings.db_url.removeprefix("sqlite:///"))
    database.mkdir(parents=True)
    answer: httpx.Response = TestClient(app).get(path, headers=bearer(caller))
    assert answer.status_code == 503, answer.text
    assert "503" in app.openapi()["paths"][path]["get"]["responses"]
