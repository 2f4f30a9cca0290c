"""A cached view's answers: its body, gzipped once, and its ETag for conditional requests.

A public view (the page, the JSON and CSV exports, the plots) is built once per board version
(``leaderboard.views``); :class:`View` keeps with the body what every request would otherwise
compute again: the body compressed with gzip (once per version, not per request) and a strong
ETag, a digest of the body. :func:`respond` answers a request from it: ``304 Not Modified`` (no
body) when ``If-None-Match`` names the current ETag, so that a poller re-downloads a view only
when it changed (a score in another track leaves the track-1 JSON, and its ETag, as they
were); the gzipped body to a client that accepts gzip; the body otherwise. Answers carry
``Cache-Control: no-cache`` (a browser keeps the view but asks again, with its ETag, each time)
and ``Vary: Accept-Encoding``.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

#: the views' media types
PAGE_TYPE = "text/html; charset=utf-8"
JSON_TYPE = "application/json"
CSV_TYPE = "text/csv; charset=utf-8"
PLOT_TYPE = "image/png"
#: the CSV export's further header
CSV_HEADERS = {"Content-Disposition": 'attachment; filename="leaderboard.csv"'}
#: bodies shorter than this are sent as they are
MIN_GZIP_BYTES = 1024
#: a gzipped body is kept only when it saves at least this share (a PNG does not)
MIN_GZIP_SAVING = 0.1
GZIP_LEVEL = 6
#: the ETag of the gzipped representation: the body's, with this suffix
GZIP_SUFFIX = "-gzip"


@dataclass(frozen=True)
class View:
    """A built view's body, its gzipped body (None when not worth it) and its ETag.

    Attributes:
        body: the view as served without a content coding.
        gzipped: ``body`` gzipped (None: below ``MIN_GZIP_BYTES`` or not compressible).
        etag: a strong ETag (quoted): a digest of ``body``, the same in every API process.
    """

    body: bytes
    gzipped: bytes | None
    etag: str

    @classmethod
    def of(cls, body: bytes) -> View:
        """Digest and compress ``body`` (once per board version, in the thread that built it)."""
        gzipped = None
        if len(body) >= MIN_GZIP_BYTES:
            gzipped = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            if len(gzipped) > (1 - MIN_GZIP_SAVING) * len(body):
                gzipped = None
        digest = hashlib.blake2b(body, digest_size=12).hexdigest()
        return cls(body=body, gzipped=gzipped, etag=f'"{digest}"')

    @property
    def gzip_etag(self) -> str:
        """The ETag of the gzipped representation (a strong ETag names one representation)."""
        return self.etag[:-1] + GZIP_SUFFIX + '"'


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header admits gzip (``gzip`` or ``*`` without ``q=0``)."""
    if not accept_encoding:
        return False
    allowed: dict[str, bool] = {}
    for item in accept_encoding.lower().split(","):
        coding, *parameters = (part.strip() for part in item.split(";"))
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        allowed[coding] = quality > 0
    return allowed.get("gzip", allowed.get("x-gzip", allowed.get("*", False)))


def not_modified(if_none_match: str | None, view: View) -> bool:
    """Whether ``If-None-Match`` names ``view``'s ETag (of either representation; weak
    comparison, as RFC 9110 section 13.1.2 asks, so ``W/`` tags match too)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    current = {view.etag, view.gzip_etag}
    return any(tag.strip().removeprefix("W/") in current for tag in if_none_match.split(","))


def answer(
    view: View, *, media_type: str, accept_encoding: str | None, if_none_match: str | None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, bytes, dict[str, str]]:  # fmt: skip
    """The status, body and headers of the answer to a request for ``view``: 304, gzipped or
    plain (``Content-Type`` and ``Content-Length`` included).

    Args:
        view: the cached view.
        media_type: the body's media type (text types with their charset).
        accept_encoding: the request's ``Accept-Encoding``.
        if_none_match: the request's ``If-None-Match``.
        headers: further headers of a full answer (e.g. ``Content-Disposition``).

    Returns:
        The status code, the body (empty for a 304) and the headers.
    """
    use_gzip = view.gzipped is not None and accepts_gzip(accept_encoding)
    common = {"cache-control": "no-cache", "vary": "Accept-Encoding",
              "etag": view.gzip_etag if use_gzip else view.etag}  # fmt: skip
    if not_modified(if_none_match, view):
        return 304, b"", common
    body = view.gzipped if use_gzip else view.body
    assert body is not None
    full = {**common, **{k.lower(): v for k, v in (headers or {}).items()},
            "content-type": media_type, "content-length": str(len(body))}  # fmt: skip
    if use_gzip:
        full["content-encoding"] = "gzip"
    return 200, body, full


def respond(
    request: Request, view: View, *, media_type: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The answer to ``request`` from ``view`` (:func:`answer`) as a response.

    Args:
        request: the request (its ``If-None-Match`` and ``Accept-Encoding``).
        view: the cached view.
        media_type: the body's media type (text types with their charset).
        headers: further headers of a full answer (e.g. ``Content-Disposition``).

    Returns:
        The response.
    """
    code, body, fields = answer(
        view, media_type=media_type, accept_encoding=request.headers.get("accept-encoding"),
        if_none_match=request.headers.get("if-none-match"), headers=headers,
    )  # fmt: skip
    response = Response(status_code=code)
    response.body = body
    response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in fields.items()]
    return response
