"""The most polled reads answered from memory, before FastAPI's routing.

Under 200 concurrent pollers the API process's event loop is its bottleneck, and most of a
cached answer's cost is FastAPI's: routing, dependency solving, exception layers, about 0.3 ms
of CPU a request on the shared 2-core machine, against a few microseconds to send a body that
is already in memory. :class:`FastReadsMiddleware` sits inside the security headers and the
request metrics and, for a ``GET`` whose path a handler claims (:class:`FastReads`), sends
that handler's answer; the handlers answer only what they find in memory for the current board
version (a kept status view, a built leaderboard view, a 304) and leave everything else (a view
to build, an unknown token, a refusal, an odd query) to the route, which remains the reference:
a fast answer is the one the route gives, byte for byte (tests/leaderboard/test_conditional.py
and tests/evaluator/test_status_read.py compare them). Each answer is counted under its
route's template, as the route's would be.

:func:`etag` and :func:`not_modified` are the conditional reads of the answers that are not the
leaderboard's (the status views'): a strong ETag, a digest of the body, and whether a request's
``If-None-Match`` names it (RFC 9110 section 13.1.2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

#: a handler's answer: status, headers (lower-case names), body
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
#: (the FastAPI app, the request's scope, the path's trailing parameter or None) -> the
#: answer, or None to leave the request to its route
Handler = Callable[[Any, dict[str, Any], str | None], Awaitable[Answer | None]]


class FastReads:
    """The paths answered before routing (an app's ``app.state.fast_reads``), and their handlers.

    A path is exact (``/leaderboard``) or ends in one parameter segment
    (``/api/v1/submissions/{submission_id}``: any one segment after the prefix).
    """

    def __init__(self) -> None:
        self._exact: dict[str, tuple[Handler, str]] = {}
        self._prefixed: dict[str, tuple[Handler, str]] = {}

    def add(self, path: str, handler: Handler, *, route: str | None = None) -> None:
        """Answer ``GET path`` with ``handler`` when it has an answer.

        Args:
            path: the exact path, or a prefix followed by one ``{parameter}`` segment.
            handler: the handler.
            route: the template of the route that answers otherwise (default ``path``): the
                metrics count the fast answers under it.
        """
        if path.endswith("}"):
            prefix = path[: path.rindex("{")]
            if not prefix.endswith("/") or "{" in prefix:
                raise ValueError(f"{path}: only one trailing parameter segment is supported")
            self._prefixed[prefix] = (handler, route or path)
        else:
            self._exact[path] = (handler, route or path)

    def find(self, path: str) -> tuple[Handler, str, str | None] | None:
        """The handler of ``path``, its route template and its parameter; None if unclaimed."""
        found = self._exact.get(path)
        if found is not None:
            return found[0], found[1], None
        prefix, _, parameter = path.rpartition("/")
        found = self._prefixed.get(prefix + "/")
        if found is None or not parameter:
            return None
        return found[0], found[1], parameter


class FastReadsMiddleware:
    """ASGI middleware answering the claimed ``GET`` paths from their handlers (see the module).

    Args:
        app: the wrapped ASGI app (the rest of FastAPI's stack).
        fast_reads: the claimed paths (read at every request: handlers may be added until the
            app serves).
    """

    def __init__(self, app: Any, fast_reads: FastReads) -> None:
        self.app, self.fast_reads = app, fast_reads

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            found = self.fast_reads.find(scope["path"])
            if found is not None:
                handler, template, parameter = found
                try:
                    answer = await handler(scope["app"], scope, parameter)
                except Exception:  # the route answers instead, with the service's error handling
                    answer = None  # (a 503 while the database is down, never a bare 500)
                if answer is not None:
                    scope["route"] = SimpleNamespace(path=template)  # the metrics' label
                    code, headers, body = answer
                    await send({"type": "http.response.start", "status": code, "headers": headers})
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)


def header(scope: dict[str, Any], name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case), as Starlette reads it."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def etag(body: bytes) -> bytes:
    """A strong ETag (quoted) of ``body``: its digest, the same in every API process."""
    return b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'


def not_modified(if_none_match: str | None, current: bytes) -> bool:
    """Whether an ``If-None-Match`` header names the ETag ``current`` (weak comparison, as RFC
    9110 section 13.1.2 asks: a ``W/`` tag matches too; ``*`` matches any)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = current.decode("latin-1")
    return any(tag.strip().removeprefix("W/") == wanted for tag in if_none_match.split(","))
