"""Who may use the console: whoever holds the token printed at its start, from this machine only.

The server listens on 127.0.0.1. Every page needs the token, from the URL printed at start (then
kept in a cookie that is HttpOnly and SameSite=Strict, and the URL is cleaned of it) or from that
cookie; another local user, who cannot read the operator's terminal, gets 403. Every action is a
POST whose form carries the token too, so a web page open in the operator's browser cannot drive
the console (CSRF): it cannot read the token, and the browser does not send the cookie with a
cross-site request. A Host header other than the loopback address the server listens on is refused
(DNS rebinding), and so is a POST whose Origin is another site. Every response forbids scripts,
styles, images and connections from anywhere but the console itself (Content-Security-Policy), and
being framed.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import parse_qs, urlencode

from starlette.datastructures import URL
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp

TOKEN_FIELD = "token"
COOKIE = "turnstile_console"
OPEN_PATHS = ("/static/",)  # stylesheet and script: nothing of the bucket in them
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # not no-referrer: a same-origin POST would then say Origin: null
    "Cache-Control": "no-store",
}
LOOPBACK = ("127.0.0.1", "localhost")
REFUSED = (
    "refused: this console needs the token of the URL `turnstile ui` printed when it started; open "
    "that URL (or start it again for a new one)"
)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def form_fields(body: bytes) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body, each field once (the last value wins)."""
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[-1] for key, values in parsed.items()}


def without_token(url: URL) -> str:
    """The URL's path and query, the token taken out (the address bar then holds no secret)."""
    kept = [(k, v) for k, v in parse_qs(url.query, keep_blank_values=True).items() if k != TOKEN_FIELD]
    query = urlencode([(k, value) for k, values in kept for value in values])
    return url.path + (f"?{query}" if query else "")


class Guard(BaseHTTPMiddleware):
    """The token, the loopback Host and the POST's Origin, checked before any page is built."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        refused = _refusal(request)
        if refused is not None:
            return _headed(PlainTextResponse(refused, status_code=403))
        if request.url.path.startswith(OPEN_PATHS):
            return _headed(await call_next(request))
        # Cookies are not kept apart by port: each console's cookie is named after its own.
        cookie = f"{COOKIE}_{request.url.port or 80}"
        in_url = request.query_params.get(TOKEN_FIELD)
        if same(in_url, self.token) and request.method == "GET":
            # Keep it in a cookie this site only sends, and take it out of the address bar.
            moved = RedirectResponse(without_token(request.url), status_code=303)
            moved.set_cookie(cookie, self.token, httponly=True, samesite="strict", path="/")
            return _headed(moved)
        if not (same(request.cookies.get(cookie), self.token) or same(in_url, self.token)):
            return _headed(PlainTextResponse(REFUSED, status_code=403))
        return _headed(await call_next(request))


def _refusal(request: Request) -> str | None:
    """Why a request is refused before its token is looked at: a Host that is not the loopback
    address (DNS rebinding), or a POST from a page of another origin (another port is one too)."""
    host = request.headers.get("host", "")
    if host.rpartition(":")[0] not in LOOPBACK and host not in LOOPBACK:
        return f"refused: the console answers on 127.0.0.1 only, not for host {host!r}"
    origin = request.headers.get("origin")
    if request.method != "GET" and origin is not None and origin != f"http://{host}":
        return f"refused: a request from another origin ({origin}) cannot act on the console"
    return None


def checked_form(body: bytes, token: str) -> Mapping[str, str] | None:
    """The POST's fields when it carries the token; None otherwise (the caller refuses it)."""
    fields = form_fields(body)
    return fields if same(fields.get(TOKEN_FIELD), token) else None


def _headed(response: Response) -> Response:
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    return response
