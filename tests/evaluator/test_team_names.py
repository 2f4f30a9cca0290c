"""Team names: one normalisation and validation for the API and the CLI, confusables as one."""

from __future__ import annotations

import json

import httpx
import pytest

from evaluator import team_names
from tests.evaluator.conftest import LiveServer
from tests.evaluator.service import pflkit


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [("alice", "alice"), ("  alice  ", "alice"), ("ocr   lab", "ocr lab"), ("ｏｃｒ", "ocr"),
     ("équipe-7", "équipe-7"), ("Team_2.b", "Team_2.b")],
)  # fmt: skip
def test_names_are_normalised(raw: str, normalised: str) -> None:
    assert team_names.normalise(raw) == normalised


@pytest.mark.parametrize(
    "raw", ["", "   ", "-alice", "+alice", "@alice", "=HYPERLINK(1)", "<b>x</b>", "a<script>",
            "$\\frac{a}$", "x" * 65, "tab\tname\x00"],
)  # fmt: skip
def test_invalid_names_are_refused(raw: str) -> None:
    with pytest.raises(team_names.InvalidTeamName):
        team_names.normalise(raw)


def test_confusable_names_share_a_key() -> None:
    same = {team_names.key(n) for n in ("alice", "\u0430lice", "alice ", "Alice", "ALICE")}
    assert len(same) == 1
    assert team_names.key("alice") != team_names.key("bob")


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_api_refuses_confusable_and_invalid_names(live_server: LiveServer, teams: dict) -> None:
    organiser = {"Authorization": f"Bearer {teams['org']}"}
    url = f"{live_server.url}/api/v1/teams"
    created = httpx.post(url, json={"name": "  alice "}, headers=organiser)
    assert created.status_code == 201 and created.json()["name"] == "alice"
    for twin in ("\u0430lice", "alice ", "ALICE"):
        answer = httpx.post(url, json={"name": twin}, headers=organiser)
        assert answer.status_code == 409 and "'alice' already exists" in answer.json()["detail"]
    for bad in ("-alice", "+x", "@x", "<img src=x>", "$\\frac{a}$"):
        answer = httpx.post(url, json={"name": bad}, headers=organiser)
        assert answer.status_code == 422, answer.text
        assert "team name" in json.dumps(answer.json()["detail"])


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_cli_uses_the_same_rules(database_url: str) -> None:
    made = pflkit("team", "create", " alice ", "--db", database_url, "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["team"] == "alice"
    twin = pflkit("team", "create", "\u0430lice", "--db", database_url)
    assert twin.returncode != 0 and "already exists" in twin.stderr
    markup = pflkit("team", "create", "<b>x</b>", "--db", database_url)
    assert markup.returncode == 2 and "must start with a letter or digit" in markup.stderr
