"""`email-handler outbox` against LocalStack's /_aws/ses, with the response shapes LocalStack 4.4.0
returned here (SendRawEmail and SendEmail; SESv2 SendEmail is not in the community edition). The
live path is tests/docker/test_compose.py's scenario against the LocalStack stack."""

from __future__ import annotations

import json
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from local import outbox

RAW = (
    "From: hello@example.com\r\nTo: Jane <jane@corp.example>\r\nSubject: =?utf-8?q?H=C3=A9llo?=\r\n"
    "Date: Mon, 23 Nov 2026 10:00:00 +0000\r\nMessage-ID: <x@y>\r\n\r\nbody\u00e9\r\n"
)
# GET /_aws/ses after one SendRawEmail (Source + Destinations given) and one SendEmail, LocalStack 4.4.0.
MEASURED = {
    "messages": [
        {
            "Id": "zmgxhflcupceylij-uswqyhrb-sbio-ndij-iord-qptjrmcbmdoi-ncayxu",
            "Region": "us-east-1",
            "Destination": {"ToAddresses": ["c@corp.example"]},
            "Source": "hello@example.com",
            "Subject": "s",
            "Body": {"text_part": "t", "html_part": None},
            "Timestamp": "2026-11-23T16:47:16",
        },
        {
            "Id": "zflasjskgpemzxpo-ondxeosx-uoor-svox-uoed-npfbcqrddhvb-vbutje",
            "Region": "us-east-1",
            "Source": "hello@example.com",
            "RawData": RAW,
            "Timestamp": "2026-11-23T16:47:09",
        },
    ]
}


@pytest.fixture
def localstack() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            routes: dict[str, Any] = {"/_aws/ses": MEASURED, "/_localstack/health": {"version": "4.4.0"}}
            body = json.dumps(routes[self.path]).encode() if self.path in routes else b""
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_localstack_items_oldest_first_with_utc_timestamps(localstack: str) -> None:
    assert outbox.is_localstack(localstack)
    raw, simple = outbox.sent(localstack)
    assert raw == {
        "id": "zflasjskgpemzxpo-ondxeosx-uoor-svox-uoed-npfbcqrddhvb-vbutje",
        "timestamp": "2026-11-23T16:47:09Z",
        "source": "hello@example.com",
        "destinations": ["jane@corp.example"],
        "subject": "Héllo",
        "raw": RAW,
    }
    assert simple["timestamp"] == "2026-11-23T16:47:16Z" and simple["destinations"] == ["c@corp.example"]
    assert (
        simple["subject"] == "s"
        and "To: c@corp.example" in simple["raw"]
        and simple["raw"].rstrip().endswith("t")
    )


def test_moto_is_not_taken_for_localstack(localstack: str) -> None:
    assert not outbox.is_localstack(localstack + "/nothing-here")


def test_a_dump_the_emulator_fails_once_is_read_again() -> None:
    """moto's data.json answered 500 once (a busy emulator), then the dump: the outbox reads it; a
    client error (404) is not asked again."""
    answers = [500, 200]
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            status = answers.pop(0) if self.path == "/moto-api/data.json" and answers else 404
            body = json.dumps({"ses": {"RawMessage": [{"id": "m1", "raw_data": RAW}]}}).encode()
            self.send_response(status)
            self.end_headers()
            if status == 200:
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert [i["id"] for i in outbox.from_moto(url)] == ["m1"]
        assert asked.count("/moto-api/data.json") == 2
        with pytest.raises(urllib.error.HTTPError):
            outbox.from_moto(url + "/nothing-here")
        assert asked.count("/nothing-here/moto-api/data.json") == 1
    finally:
        server.shutdown()
