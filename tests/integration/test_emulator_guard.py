"""The local emulator refuses web pages: no CORS, no foreign Origin, the admin's token for /moto-api
(local/guard.py), and no listening beyond loopback unless the operator says so."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from local import fresh
from local.emulator import EmbeddedMoto, RemoteHostError
from local.guard import admin_headers
from ops import main as cli

EVIL = "https://evil.example"


def ask(
    url: str, method: str = "GET", headers: dict[str, str] | None = None, data: bytes | None = None
) -> Any:
    """(status, headers, body) of one request, errors included."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def no_cors(headers: dict[str, str]) -> bool:
    return not any(name.lower().startswith("access-control-") for name in headers)


@pytest.fixture
def queue(moto_server: str) -> Iterator[str]:
    """A queue that exists before the attempts below and must exist after them."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"guard-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)


def test_cross_origin_reads_and_preflights_are_refused_without_cors_headers(moto_server: str) -> None:
    data = moto_server + "/moto-api/data.json"
    for headers in ({"Origin": EVIL}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
        status, answered, body = ask(data, headers={**admin_headers(), **headers})  # even with the token
        assert status == 403 and no_cors(answered) and b"refused" in body, (headers, body)
    preflight = {"Origin": EVIL, "Access-Control-Request-Method": "POST"}
    status, answered, _ = ask(moto_server + "/moto-api/reset", method="OPTIONS", headers=preflight)
    assert status == 403 and no_cors(answered)
    # An AWS API call from a page is refused too; boto3 sends no Origin and is answered, without CORS.
    status, answered, _ = ask(moto_server + "/?Action=ListQueues", headers={"Origin": EVIL})
    assert status == 403 and no_cors(answered)
    assert boto3.client("sqs").list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
    status, answered, _ = ask(moto_server + "/moto-api/data.json", headers=admin_headers())
    assert status == 200 and no_cors(answered)
    own = {"Origin": moto_server}  # its own dashboard's origin is served, and still gets no CORS headers
    status, answered, _ = ask(moto_server + "/moto-api/data.json", headers={**admin_headers(), **own})
    assert status == 200 and no_cors(answered)


def test_a_request_for_another_host_name_is_refused(moto_server: str) -> None:
    """DNS rebinding: evil.example resolved to 127.0.0.1 is the page's own origin to the browser."""
    for host in ("evil.example", "evil.example:4566", "127.0.0.1.evil.example"):
        status, answered, body = ask(
            moto_server + "/moto-api/data.json", headers={**admin_headers(), "Host": host}
        )
        assert status == 403 and b"host name refused" in body and no_cors(answered), host
    port = moto_server.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"bucket.localhost:{port}"):
        assert (
            ask(moto_server + "/moto-api/data.json", headers={**admin_headers(), "Host": host})[0] == 200
        ), host


def test_cross_origin_posts_change_nothing(moto_server: str, queue: str) -> None:
    form = {"Origin": EVIL, "Content-Type": "application/x-www-form-urlencoded"}
    assert ask(moto_server + "/moto-api/reset", "POST", form, b"")[0] == 403
    assert ask(moto_server + fresh.ACCOUNT_PATH, "POST", form, b'{"account": "fresh"}')[0] == 403
    zone = b"example.com. 300 IN MX 10 mail.evil.example.\n"
    assert ask(moto_server + fresh.DNS_PATH, "POST", {**form, "Sec-Fetch-Site": "cross-site"}, zone)[0] == 403
    assert not fresh.fresh()  # the account model did not switch
    boto3.client("sqs").get_queue_attributes(QueueUrl=queue)  # the emulator was not reset


def test_moto_api_needs_the_admins_token(moto_server: str, queue: str) -> None:
    asked = (
        ("/moto-api/data.json", "GET", None),
        ("/moto-api/reset", "POST", b""),
        (fresh.ACCOUNT_PATH, "POST", b""),
    )
    for path, method, data in asked:
        for headers in ({}, {"Authorization": "Bearer " + "0" * 64}):
            status, answered, body = ask(moto_server + path, method, headers, data)
            assert status == 401 and no_cors(answered) and b"token" in body, (path, headers)
    boto3.client("sqs").get_queue_attributes(QueueUrl=queue)  # nothing was reset
    status, _, body = ask(moto_server + fresh.ACCOUNT_PATH, headers=admin_headers())
    assert status == 200 and json.loads(body) == {"account": "default"}


def test_the_cli_verbs_still_reach_it(moto_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    """outbox reads data.json, `dns publish` posts a zone: both with the admin's token, by themselves."""
    assert cli.main(["outbox", "--json", "--endpoint", moto_server]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)
    fresh.set_fresh(True)
    try:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".zone") as zone:
            zone.write("guard.example. 300 IN MX 10 inbound-smtp.us-east-1.amazonaws.com.\n")
            zone.flush()
            assert cli.main(["dns", "publish", zone.name, "--endpoint", moto_server]) == 0
        assert "published 1 records" in capsys.readouterr().out
    finally:
        fresh.reset()
        fresh.set_fresh(False)


def test_it_listens_beyond_loopback_only_when_told(capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("0.0.0.0", "192.0.2.10", "::"):
        with pytest.raises(RemoteHostError, match="--allow-remote"):
            EmbeddedMoto(host, 1)
    assert EmbeddedMoto("0.0.0.0", 1, allow_remote=True).host == "0.0.0.0"  # said so: allowed
    assert EmbeddedMoto("::1", 1).host == "::1" and EmbeddedMoto("localhost", 1).host == "localhost"
    assert cli.main(["emulator", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


# --- the stack's own secret (local/secret.py) ------------------------------------------------------

OLD_SEED = b"service-email-handler local emulator"  # the constant every stack derived its keys from


def old_admin_keys() -> tuple[str, str]:
    """The local admin's keys as the constant in the source derived them (written here, as it was)."""
    import hashlib
    import string

    identity = b"user/local-admin"
    digest = hashlib.sha256(OLD_SEED + identity).hexdigest().upper()
    alphabet = string.ascii_uppercase + string.digits
    key_id = "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 32, 2))
    return "AKIA" + key_id, hashlib.sha256(b"secret:" + OLD_SEED + identity).hexdigest()[:40]


def test_the_stack_secret_is_made_once_0600_and_differs_between_two_fresh_stacks(tmp_path: Any) -> None:
    import os
    import stat
    import subprocess
    import sys

    from local import secret
    from tests.conftest import REPO

    made = []
    for stack in ("one", "two"):  # what scripts/compose.sh runs for a fresh stack's .build/local
        out = tmp_path / stack
        done = subprocess.run(
            [sys.executable, "-m", "local.env", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if k != secret.VARIABLE},
        )
        assert done.returncode == 0, done.stderr
        path = out / "emulator.env"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        value = secret.ensure(path)
        assert len(value) == 64 and path.read_text() == f"{secret.VARIABLE}={value}\n"
        assert secret.ensure(path) == value  # made once: kept across restarts
        keys = (out / "credentials").read_text()
        assert stat.S_IMODE((out / "credentials").stat().st_mode) == 0o600
        made.append((value, keys, (out / "functions" / "reply-sender.env").read_text()))
    (one, two) = made
    assert one[0] != two[0] and one[1] != two[1] and one[2] != two[2]
    placeholder = tmp_path / "three" / "emulator.env"  # `make down` before any `up`: an empty file
    placeholder.parent.mkdir()
    placeholder.touch(mode=0o644)
    assert len(secret.ensure(placeholder)) == 64 and stat.S_IMODE(placeholder.stat().st_mode) == 0o600


def test_the_constant_in_the_source_no_longer_opens_the_emulator(moto_server: str) -> None:
    """Neither the admin's keys nor the /moto-api token derived from the old constant are accepted."""
    import hashlib
    import hmac

    from local.iam import admin_credentials
    from tests.conftest import IAM_ENFORCED

    key_id, secret_key = old_admin_keys()
    assert key_id != admin_credentials()["AWS_ACCESS_KEY_ID"]
    sts = boto3.client(
        "sts",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret_key,
    )
    if IAM_ENFORCED:  # the emulator checks keys only where it enforces IAM (IAM=off: any key passes)
        with pytest.raises(Exception) as refused:
            sts.get_caller_identity()
        assert "InvalidClientTokenId" in str(refused.value) or "403" in str(refused.value)
    old_token = hmac.new(secret_key.encode(), b"service-email-handler moto-api", hashlib.sha256).hexdigest()
    status, _, _ = ask(moto_server + "/moto-api/data.json", headers={"Authorization": f"Bearer {old_token}"})
    assert status in (401, 403)
    assert ask(moto_server + "/moto-api/data.json", headers=admin_headers())[0] == 200
