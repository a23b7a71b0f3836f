"""A fault-injecting HTTP proxy in front of moto's SES endpoints (``SesProxy.env`` points
AWS_ENDPOINT_URL_SES and AWS_ENDPOINT_URL_SESV2 here).

Every send (SESv2 SendEmail, or SESv1 SendRawEmail) is passed to ``plan(request_number, params)``
(v1 query parameters; a v2 request is shown in the same shape: ``Action``, ``Source``,
``Destinations.member.N``), which answers ``None``
(forward to moto), ``("error", code)`` (an SES error response, parsed by botocore like the real
thing), or ``("hang", seconds)`` (hold the request: a crash or timeout mid-send). Arrival times of
forwarded sends that SES accepted are recorded for the rate tests. ``rewrite(params, body)`` may
change any forwarded response body (an SES state moto cannot be put in, such as a pending identity).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

Plan = Callable[[int, dict[str, str]], Any]

SENDS = ("SendRawEmail", "SendEmail")
_ERROR = """<ErrorResponse xmlns="http://ses.amazonaws.com/doc/2010-12-01/">
<Error><Type>Sender</Type><Code>{code}</Code><Message>injected {code}</Message></Error>
<RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"""


class SesProxy:
    def __init__(
        self,
        upstream: str,
        plan: Plan | None = None,
        rewrite: Callable[[dict[str, str], bytes], bytes] | None = None,
    ) -> None:
        self.upstream, self.plan = upstream.rstrip("/"), plan or (lambda n, p: None)
        self.rewrite = rewrite or (lambda params, body: body)
        self.calls = 0
        self.sent_at: list[float] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                params = _params(self.path, body)
                v2 = self.path.startswith("/v2/")
                action, arrived = None, time.time()
                if params.get("Action") in SENDS:
                    with proxy.lock:
                        proxy.calls += 1
                        n = proxy.calls
                    action = proxy.plan(n, params)
                if action and action[0] == "hang":
                    time.sleep(action[1])
                    self.close_connection = True
                    return
                if action and action[0] == "error":
                    status = 400 if action[1] not in ("ServiceUnavailable", "InternalFailure") else 503
                    data = (
                        json.dumps({"message": f"injected {action[1]}"})
                        if v2
                        else _ERROR.format(code=action[1])
                    ).encode()
                    self.send_response(status)
                    if v2:  # rest-json errors carry their code in this header
                        self.send_header("x-amzn-ErrorType", action[1])
                    self.send_header("Content-Type", "application/json" if v2 else "text/xml")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                # The Host header goes along unchanged: it is signed, and the emulator checks signatures.
                request = urllib.request.Request(
                    proxy.upstream + self.path, data=body, method="POST", headers=dict(self.headers.items())
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as resp:
                        status, data, ctype = (
                            resp.status,
                            resp.read(),
                            resp.headers.get("Content-Type", "text/xml"),
                        )
                except urllib.error.HTTPError as exc:
                    status, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "text/xml")
                if params.get("Action") in SENDS and status == 200:
                    with proxy.lock:
                        proxy.sent_at.append(arrived)
                data = proxy.rewrite(params, data)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def env(self) -> dict[str, str]:
        """The variables that send a process's SES clients (v1 and v2) through this proxy."""
        return {"AWS_ENDPOINT_URL_SES": self.url, "AWS_ENDPOINT_URL_SESV2": self.url}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _params(path: str, body: bytes) -> dict[str, str]:
    if not path.startswith("/v2/email/outbound-emails"):
        return {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
    try:
        doc = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return {}
    to = (doc.get("Destination") or {}).get("ToAddresses") or []
    return {
        "Action": "SendEmail",
        "Source": str(doc.get("FromEmailAddress", "")),
        **{f"Destinations.member.{i}": str(a) for i, a in enumerate(to, 1)},
    }
