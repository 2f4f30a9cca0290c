"""The routes' documented error answers (FastAPI ``responses=``), one constant per meaning.

Each constant maps a status code to its OpenAPI description; a route merges those it can answer,
``responses={**UNAUTHORISED, **THROTTLED, **NOT_FOUND}``, so that the schema, and the REST API
page built from it (docs/hooks/rest_api.py), list them. The descriptions follow the messages the
code raises (``evaluator.api.deps``, ``evaluator.api.errors``, the routes): what happened, then
what to do. FastAPI copies these dictionaries when it builds the schema; never change them.
"""

from __future__ import annotations

from typing import Any

#: FastAPI's type of ``responses=``
Responses = dict[int | str, dict[str, Any]]

NOT_MODIFIED: Responses = {
    304: {"description": "unchanged since the `ETag` sent in `If-None-Match` (no body): keep "
                         "the copy you have"},
}  # fmt: skip
UNAUTHORISED: Responses = {
    401: {"description": "missing or unknown bearer token: send `Authorization: Bearer "
                         "<token>` with the token `pflkit team create` printed for your team"},
}  # fmt: skip
ORGANISER_UNAUTHORISED: Responses = {
    401: {"description": "no organiser credentials (a participant's token counts as none): send "
                         "`Authorization: Bearer <organiser token>` or sign in at "
                         "`/leaderboard/organiser`"},
}  # fmt: skip
FORBIDDEN: Responses = {
    403: {"description": "a participant's token: this endpoint needs an organiser token"},
}
NOT_FOUND: Responses = {
    404: {"description": "no such submission for this token (another team's submission is "
                         "answered the same): check the id `pflkit submit` printed"},
}  # fmt: skip
TEAM_EXISTS: Responses = {
    409: {"description": "a team of that name, or of one a reader could mistake for it, "
                         "exists: choose another name"},
}  # fmt: skip
NOT_ENDED: Responses = {
    409: {"description": "the submission is queued or being scored: wait for it to end, then "
                         "ask again"},
}  # fmt: skip
THROTTLED: Responses = {
    429: {"description": "too many failed authentications from this address: wait the "
                         "`Retry-After` seconds, then retry with a valid token"},
}  # fmt: skip
DATABASE_UNAVAILABLE: Responses = {
    503: {"description": "the evaluator's database is unavailable for a moment: retry after "
                         "`Retry-After` seconds"},
}  # fmt: skip

#: what a route behind a team's token (``CurrentTeam``, or the bearer read by the route) may answer
TEAM_AUTH: Responses = {**UNAUTHORISED, **THROTTLED}
#: what a route behind an organiser's token (``Organiser``) may answer
ORGANISER_AUTH: Responses = {**UNAUTHORISED, **FORBIDDEN, **THROTTLED}
#: what a route behind an organiser's token or sign-in session (``require_organiser``) may
#: answer: a participant's token is refused 401 there, not 403
ORGANISER_SESSION_AUTH: Responses = {**ORGANISER_UNAUTHORISED, **THROTTLED}
