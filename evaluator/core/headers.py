"""Security headers on every response (a pure ASGI middleware).

Pages get a strict Content-Security-Policy (only the app's own stylesheet and images, no
scripts, no framing); the interactive API docs (``/docs``, ``/redoc``) load FastAPI's Swagger UI
and ReDoc from their CDN and get the policy they need, and the documentation site, where the
service serves it, gets the policy of a static MkDocs site (its own scripts and inline ones). Every response carries
``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and ``Referrer-Policy``.
"""

from __future__ import annotations

from typing import Any

PAGE_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
    "https://cdn.redoc.ly; worker-src blob:; frame-ancestors 'none'; base-uri 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
SITE_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; "
    "style-src 'self' 'unsafe-inline' https://fonts.googleapis.com; "
    "font-src 'self' https://fonts.gstatic.com; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'"
)


class SecurityHeaders:
    """Add the security headers to every HTTP response of the wrapped app.

    Args:
        app: the ASGI application.
        site_path: where the service serves the documentation site (``None``: it does not).
    """

    def __init__(self, app: Any, site_path: str | None = None) -> None:
        self.app = app
        self.site_path = site_path

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self.site_path is not None and path.startswith(self.site_path):
            policy = SITE_POLICY
        else:
            policy = DOCS_POLICY if path.startswith(DOCS_PATHS) else PAGE_POLICY
        extra = [
            (b"content-security-policy", policy.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"same-origin"),
        ]

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
