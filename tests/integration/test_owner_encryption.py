"""`email-handler dev` started with the owner's key (OWNER_SMIME_CERT or OWNER_PGP_KEY, a path): a
first contact's forward in `outbox --json` is encrypted to it and decrypts to the original; the
contact's acknowledgement is not encrypted; a key that cannot encrypt stops the start."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from email import message_from_string, policy
from pathlib import Path

import pytest

from common.mail.encrypt import ENCRYPTED_TYPES, NEUTRAL_SUBJECT, parse, status
from deploy import config
from local.env import aws_endpoint, local_env
from tests.conftest import REPO
from tests.support.devproc import DevProcess
from tests.support.ownerkeys import NOW, body_text, pgp_owner, smime_owner
from tests.support.scenario import LocalSystem, wait_for

FIRST_CONTACT = (
    b"From: Jane Smith <jane@corp.example>\r\nTo: hello@example.com\r\n"
    b"Subject: A role you may like\r\nMessage-ID: <first-contact-1@corp.example>\r\n"
    b"Date: Wed, 25 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: "
    b"text/plain; charset=utf-8\r\n\r\nHello, we have a senior role in Lisbon. Interested?\r\n"
)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["smime", "pgp"])
def test_a_first_contact_forward_is_encrypted_to_the_owner_key_and_decrypts_to_the_original(
    tmp_path: Path, kind: str
) -> None:
    owner = smime_owner() if kind == "smime" else pgp_owner()
    path = tmp_path / ("owner.pem" if kind == "smime" else "owner.asc")
    path.write_text(owner.pem if kind == "smime" else owner.armored)  # type: ignore[union-attr]
    variable = "OWNER_SMIME_CERT" if kind == "smime" else "OWNER_PGP_KEY"
    dev = DevProcess(tmp_path / "logs", env={variable: str(path)})
    try:
        dev.start(180)
        system = LocalSystem(smtp_port=dev.smtp, endpoint=dev.endpoint)
        system.send("jane@corp.example", "hello@example.com", FIRST_CONTACT)

        def both() -> list[dict] | None:
            items = system.outbox()
            return items if len(items) >= 2 else None

        items = wait_for("the acknowledgement and the forward", both, 120)
        by_to = {item["destinations"][0]: item for item in items}
        ack, fwd = by_to["jane@corp.example"], by_to["owner@example.net"]
        assert (
            message_from_string(ack["raw"], policy=policy.default).get_content_type() not in ENCRYPTED_TYPES
        )
        outer = message_from_string(fwd["raw"], policy=policy.default)
        assert outer.get_content_type() == (
            "application/pkcs7-mime" if kind == "smime" else "multipart/encrypted"
        )
        assert fwd["subject"] == NEUTRAL_SUBJECT and "Lisbon" not in fwd["raw"]
        with aws_endpoint(dev.endpoint, local_env()):  # what `email-handler status` shows of the stored key
            shown = status(config.load({**local_env(), variable: str(path)}))
        assert shown is not None and shown["kind"] == kind and "problem" not in shown
        assert shown["fingerprint"] == parse(path.read_text()).fingerprint
        inner = owner.decrypt(fwd["raw"].encode())
        assert inner["Subject"] == "A role you may like"
        assert "we have a senior role in Lisbon" in body_text(inner)
        assert "forwarded by service-email-handler" in body_text(inner)  # the forward as built, whole
    finally:
        assert dev.stop() == 0, dev.text[-2000:]


@pytest.mark.timeout(120)
def test_dev_refuses_an_expired_certificate_before_starting_anything(tmp_path: Path) -> None:
    path = tmp_path / "owner.pem"
    path.write_text(smime_owner(not_after=NOW - dt.timedelta(days=2)).pem)
    dev = DevProcess(tmp_path / "logs")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.main",
            "dev",
            "--emulator-port",
            str(dev.aws),
            "--smtp-port",
            str(dev.smtp),
            "--function-port",
            str(dev.first),
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "OWNER_SMIME_CERT": str(path)},
    )
    assert done.returncode != 0
    assert "expired on" in done.stdout + done.stderr and "OWNER_SMIME_CERT" in done.stdout + done.stderr
    assert "AWS emulator" not in done.stdout  # nothing was started
