"""Settings (environment, unsafe values) and the `team create` / `submit` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from evaluator.cli import submit, team
from evaluator.core.config import Settings
from evaluator.core.db import migrate, schema_is_current, session_scope
from evaluator.core.security import hash_token
from evaluator.tables import Team


def test_defaults_live_in_the_storage_directory(tmp_path: Path) -> None:
    settings = Settings(storage_dir=tmp_path)
    assert settings.db_url == f"sqlite:///{tmp_path.resolve() / 'evaluator.db'}"
    assert settings.queue == f"sqlite:///{tmp_path.resolve() / 'queue.db'}"
    assert settings.max_request_bytes > settings.max_model_bytes


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PFLKIT_EVALUATOR_DAILY_QUOTA", "7")
    monkeypatch.setenv("PFLKIT_EVALUATOR_QUEUE_URL", "redis://127.0.0.1:6379/3")
    settings = Settings(storage_dir=tmp_path)
    assert settings.daily_quota == 7 and settings.queue == "redis://127.0.0.1:6379/3"
    assert Settings(**{"storage_dir": tmp_path, **_from_env(settings)}).daily_quota == 7


def _from_env(settings: Settings) -> dict:
    prefix = "PFLKIT_EVALUATOR_"
    return {
        k[len(prefix) :].lower(): v
        for k, v in settings.environment().items()
        if k[len(prefix) :].lower() in ("daily_quota", "queue_url")
    }


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"organiser_token": "changeme"}, "at least 32 random characters"),
        ({"organiser_token": "x" * 10}, "at least 32 random characters"),
        ({"database_url": "sqlite:///:memory:"}, "in-memory SQLite"),
        ({"database_url": "mysql://db"}, "sqlite:/// file or a postgresql"),
        ({"queue_url": "amqp://broker"}, "sqlite:///PATH or redis://"),
        ({"daily_quota": 0}, "greater than or equal to 1"),
        ({"lease_seconds": 1, "reap_interval_seconds": 5}, "must not exceed lease_seconds"),
        ({"max_model_bytes": 10**12}, "may not exceed"),
    ],
)
def test_unsafe_values_fail(values: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**values)


def test_strong_organiser_token_is_accepted_and_kept_secret() -> None:
    settings = Settings(organiser_token="k" * 40)
    assert "k" * 40 not in repr(settings)


def test_team_create_prints_a_token_and_stores_only_its_hash(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    runner = CliRunner()
    result = runner.invoke(team, ["create", "alpha", "--db", url, "--json"])
    assert result.exit_code == 0, result.output
    token = json.loads(result.stdout)["token"]
    assert token.startswith("pfl_") and len(token) > 40
    result = runner.invoke(team, ["create", "org", "--db", url, "--organiser"])
    assert result.exit_code == 0
    organiser_token = result.stdout.strip().splitlines()[0]
    with session_scope(url) as session:
        rows = {row.name: row for row in session.query(Team)}
    assert rows["alpha"].token_hash == hash_token(token) and not rows["alpha"].is_organiser
    assert rows["org"].is_organiser and rows["org"].token_hash == hash_token(organiser_token)
    assert token not in (tmp_path / "db.sqlite").read_bytes().decode("latin-1")
    result = runner.invoke(team, ["create", "alpha", "--db", url])
    assert result.exit_code == 1 and "already exists" in result.output


def test_migrations_are_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    migrate(url)
    assert schema_is_current(url)


def test_submit_names_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    result = CliRunner().invoke(
        submit, [str(tmp_path / "run"), "--server", "http://127.0.0.1:9", "--token", "t"]
    )
    assert result.exit_code == 1
    assert "checkpoint/model.safetensors is missing" in result.output


def test_serve_refuses_unsafe_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pflkit.serve import serve

    runner = CliRunner()
    monkeypatch.setenv("PFLKIT_EVALUATOR_ORGANISER_TOKEN", "changeme")
    result = runner.invoke(serve, ["--no-worker", "--storage", str(tmp_path)])
    assert result.exit_code == 2
    assert "organiser token must be at least 32 random characters" in result.output
    monkeypatch.delenv("PFLKIT_EVALUATOR_ORGANISER_TOKEN")
    result = runner.invoke(serve, ["--db", "sqlite:///:memory:", "--no-worker"])
    assert result.exit_code == 2 and "in-memory SQLite" in result.output
    result = runner.invoke(serve, ["--storage", str(tmp_path)])
    assert result.exit_code == 2 and "--data DIR" in result.output
    result = runner.invoke(serve, ["--storage", str(tmp_path), "--data", str(tmp_path)])
    assert result.exit_code == 2 and "holds no hidden test split" in result.output


def test_migrations_match_the_models(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from evaluator.core.db import get_engine
    from evaluator.tables import Base

    with get_engine(database_url).connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_routers_given_to_the_app_are_served_by_it(tmp_path: Path) -> None:
    from fastapi import APIRouter
    from fastapi.testclient import TestClient

    from evaluator.main import create_app

    router = APIRouter()
    router.add_api_route("/pages/hello", lambda: {"hello": "world"})
    settings = Settings(storage_dir=tmp_path)
    with TestClient(create_app(settings, routers=(router,))) as client:
        assert client.get("/pages/hello").json() == {"hello": "world"}
        assert client.get("/healthz").status_code == 200
    with TestClient(create_app(settings)) as client:
        assert client.get("/pages/hello").status_code == 404


def test_the_evaluator_never_loads_the_leaderboard() -> None:
    import evaluator

    root = Path(evaluator.__file__).parent
    for source in root.rglob("*.py"):
        text = source.read_text()
        assert "leaderboard." not in text and "import leaderboard" not in text, source
