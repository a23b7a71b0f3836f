"""What keeps a web page in the developer's browser away from the local emulator.

moto's server answers every Origin with CORS headers (flask-cors), and its ``/moto-api/*`` endpoints
need no credentials: ``/moto-api/data.json`` holds the admin keys, every role's keys, THREAD_SECRET
and every mail; ``/moto-api/reset`` and the project's control endpoints (``/moto-api/service-email-
handler/dns`` and ``.../account``, local/fresh.py) change it. :class:`Guard` wraps the
server's WSGI application:

* it sends no CORS headers at all (whatever moto adds is dropped), so no page of another origin
  may read an answer, and a preflight (``OPTIONS`` with ``Origin``) is refused: a cross-origin
  request with an ``Authorization`` header or a JSON body is never sent by a browser;
* it refuses any request whose ``Origin`` is not the emulator's own, and any the browser marks as
  coming from another site (``Sec-Fetch-Site``), before moto sees it: a form or a ``no-cors``
  fetch, which a browser sends without asking, changes nothing;
* on a loopback address it answers only requests sent to a loopback name (``Host``: 127.0.0.1,
  localhost, ``*.localhost``, ::1): a page whose own name an attacker points at 127.0.0.1 (DNS
  rebinding) is same-origin to the browser, and its requests carry that name;
* ``/moto-api/*`` needs the local admin's token (:func:`admin_token`: a bearer token derived from the
  ``local-admin`` secret, the credentials the CLI already uses), whether IAM is enforced or not.

AWS API requests stay as they are: SigV4 from boto3 never carries an ``Origin``, and with IAM
enforced moto checks their signatures (local/iam.py). Tests: tests/integration/test_emulator_guard.py.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from deploy.emulator import emulator_token
from local.iam import admin_credentials

CONTROL_PREFIX = "/moto-api"
# Browsers mark requests from another site, including ones they send without an Origin (Fetch Metadata).
_FOREIGN_SITES = ("cross-site", "same-site")


def admin_token() -> str:
    """The bearer token for ``/moto-api/*``: derived from the local admin's secret key."""

    return emulator_token(admin_credentials()["AWS_SECRET_ACCESS_KEY"])


def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {admin_token()}"}


def admin_request(url: str, data: bytes | None = None, method: str | None = None) -> urllib.request.Request:
    """A request to the emulator's ``/moto-api/*`` carrying the local admin's token."""
    return urllib.request.Request(url, data=data, method=method, headers=admin_headers())


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (localhost, 127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Guard:
    """WSGI middleware around the emulator (see the module's docstring)."""

    def __init__(self, app: Wsgi, port: int, check_host: bool = True) -> None:
        self.app, self.port, self.check_host = app, port, check_host

    def own_origin(self, origin: str) -> bool:
        """The emulator's own pages (its dashboard): http on a loopback name and this port."""
        scheme, _, rest = origin.partition("://")
        host, _, port = rest.rpartition(":")
        return scheme == "http" and port == str(self.port) and is_loopback(host)

    def refusal(self, environ: dict[str, Any]) -> tuple[str, str]:
        """(status, reason) to refuse the request with, or ("", "")."""
        if self.check_host:
            host = str(environ.get("HTTP_HOST", "127.0.0.1"))
            name = host.rpartition(":")[0] if host.rpartition(":")[2].isdigit() else host
            if not (is_loopback(name) or name.lower().rstrip(".").endswith(".localhost")):
                return "403 Forbidden", f"request for another host name refused (Host {host[:100]})"
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and not self.own_origin(origin):
            return "403 Forbidden", f"cross-origin request refused (Origin {origin[:100]})"
        if environ.get("HTTP_SEC_FETCH_SITE", "").lower() in _FOREIGN_SITES:
            return "403 Forbidden", "request from another site refused (Sec-Fetch-Site)"
        if str(environ.get("PATH_INFO", "")).startswith(CONTROL_PREFIX):
            given = str(environ.get("HTTP_AUTHORIZATION", ""))
            if not hmac.compare_digest(given.encode(), f"Bearer {admin_token()}".encode()):
                return (
                    "401 Unauthorized",
                    "the emulator's /moto-api needs the local admin's token "
                    "(local.guard.admin_headers; the CLI sends it)",
                )
        return "", ""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        status, reason = self.refusal(environ)
        if status:
            body = json.dumps({"Error": reason}).encode()
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]

        def no_cors(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            kept = [(k, v) for k, v in headers if not k.lower().startswith("access-control-")]
            return start_response(status, kept, *exc_info)

        return self.app(environ, no_cors)
