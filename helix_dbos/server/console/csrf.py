"""CSRF protection for the console's forms: a signed double-submit token plus an origin check.

Each page sets a cookie ``helix_csrf`` (``HttpOnly``, ``SameSite=Strict``) holding a token
``<nonce>.<hmac(secret, nonce)>`` and puts the same token in a hidden field of every
form. A POST passes only when the cookie's token is signed by this console's secret, the
form's token equals it (constant-time compare), and the ``Origin`` (or, without one, the
``Referer``) header, when the browser sends one, names this host. Another site can
neither read the cookie nor forge the signature::

    guard = CsrfGuard(secret)
    token, fresh = guard.token_for(request)      # put in the form; set the cookie if fresh
    guard.check(request, form)                   # raises CsrfRejected
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from helix_dbos.errors import HelixError

COOKIE = "helix_csrf"
FIELD = "csrf_token"


class CsrfRejected(HelixError):
    """A console form was posted without a valid CSRF token, or from another origin."""


class CsrfGuard:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _signature(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def valid(self, token: str | None) -> bool:
        nonce, _, signature = (token or "").partition(".")
        return bool(nonce) and hmac.compare_digest(signature, self._signature(nonce))

    def token_for(self, request: Request) -> tuple[str, bool]:
        """The request's token, or a new one (``True``: set it with :meth:`set_cookie`)."""
        current = request.cookies.get(COOKIE)
        if self.valid(current):
            return current, False  # type: ignore[return-value]
        nonce = secrets.token_urlsafe(24)
        return f"{nonce}.{self._signature(nonce)}", True

    def set_cookie(self, response: Response, token: str, path: str) -> None:
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path=path)

    def check(self, request: Request, form: Mapping[str, object]) -> None:
        cookie = request.cookies.get(COOKIE)
        posted = form.get(FIELD)
        if not self.valid(cookie) or not isinstance(posted, str) or not hmac.compare_digest(posted, cookie or ""):
            raise CsrfRejected("the form's CSRF token is missing or does not match: reload the page and try again")
        origin = request.headers.get("origin") or request.headers.get("referer")
        if origin and urlsplit(origin).netloc != request.headers.get("host"):
            raise CsrfRejected(f"a form posted from {urlsplit(origin).netloc!r} is not accepted here")
