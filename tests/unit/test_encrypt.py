"""Mail to the owner encrypted to the owner's key: S/MIME enveloped data (RFC 8551) and PGP/MIME
(RFC 3156), the protected headers inside, and every key that cannot encrypt refused with a reason."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from common.errors import ConfigError
from common.mail.build import build
from common.mail.encrypt import ENCRYPTED_TYPES, NEUTRAL_SUBJECT, OwnerKeyError, encrypt, parse
from common.mail.outbound import Attachment, OutboundMessage
from common.runtime.config import ENCRYPTION_GROWTH
from deploy.config import load
from deploy.errors import DeployError
from deploy.functions import BY_NAME
from deploy.iam import policy as policy_document
from deploy.lambdas import environment
from deploy.preflight import load_config
from tests.support.ownerkeys import NOW, body_text, pgp_owner, signing_only, smime_owner
from tests.unit.test_preflight import ACCOUNT, environ


def forward(
    text: str = "The original body, with é.", attachments: list[Attachment] | None = None
) -> OutboundMessage:
    return OutboundMessage(
        kind="forward",
        idempotency_key="forward:m1",
        correlation_id="forward-m1",
        to=["owner@example.net"],
        subject="Job offer: senior engineer",
        text=text,
        html="<p>The original body</p>",
        from_name="Jane Smith via example.com",
        reply_to="jane-at-corp.com+abc@thread.example.com",
        references=["<m1@corp.com>"],
        attachments=attachments or [],
    )


def built(msg: OutboundMessage, blobs: dict[str, bytes] | None = None) -> Any:
    return build(msg, "hello@example.com", "example.com", "attachments/", lambda key: (blobs or {})[key])


@pytest.mark.parametrize("make", [smime_owner, pgp_owner], ids=["smime", "pgp"])
def test_a_forward_decrypts_to_the_original_with_its_headers_inside_and_a_neutral_subject_outside(
    make: Callable[[], Any],
) -> None:
    owner = make()
    key = parse(owner.pem if hasattr(owner, "pem") else owner.armored)
    raw = encrypt(built(forward()), key).as_bytes()
    outer = message_from_bytes(raw, policy=policy.default)
    assert outer.get_content_type() in ENCRYPTED_TYPES
    assert outer["Subject"] == NEUTRAL_SUBJECT and b"Job offer" not in raw and b"original body" not in raw
    # what delivery and threading need stays outside
    assert (
        outer["To"] == "owner@example.net" and outer["Reply-To"] == "jane-at-corp.com+abc@thread.example.com"
    )
    assert outer["References"] == "<m1@corp.com>"
    inner = owner.decrypt(raw)
    assert inner["Subject"] == "Job offer: senior engineer" and "Jane Smith via example.com" in inner["From"]
    assert inner.get_param("hp") == "cipher" and inner.get_param("protected-headers") == "v1"  # RFC 9788
    assert "The original body, with é." in body_text(inner)


def test_the_owner_may_keep_the_original_subject_outside() -> None:
    owner = smime_owner()
    raw = encrypt(built(forward()), parse(owner.pem), "original").as_bytes()
    assert message_from_bytes(raw, policy=policy.default)["Subject"] == "Job offer: senior engineer"


@pytest.mark.parametrize("make", [smime_owner, pgp_owner], ids=["smime", "pgp"])
@pytest.mark.parametrize("subject_setting", [NEUTRAL_SUBJECT, "original", "Message"])
def test_a_hidden_correspondent_forward_shows_only_generic_fields_outside_and_the_real_ones_inside(
    make: Callable[[], Any], subject_setting: str
) -> None:
    owner = make()
    key = parse(owner.pem if hasattr(owner, "pem") else owner.armored)
    hidden = forward()
    hidden.reply_to = "a" * 64 + "@thread.example.com"  # what deliver gives it: an opaque thread address
    raw = encrypt(built(hidden), key, subject_setting, hide_correspondent=True).as_bytes()
    outer = message_from_bytes(raw, policy=policy.default)
    assert outer["From"] == "hello@example.com"  # the bare public address: no display name at all
    # ENCRYPTED_SUBJECT applies, but "original" cannot bring the real subject out
    assert outer["Subject"] == ("Message" if subject_setting == "Message" else NEUTRAL_SUBJECT)
    assert b"Jane" not in raw and b"Smith" not in raw and b"Job offer" not in raw
    inner = owner.decrypt(raw)
    # the protected header fields (RFC 9788): the forward as built, the contact named in From
    [sender] = inner["From"].addresses
    assert (sender.display_name, sender.addr_spec) == ("Jane Smith via example.com", "hello@example.com")
    assert inner["Subject"] == "Job offer: senior engineer" and inner["To"] == "owner@example.net"
    assert inner.get_param("hp") == "cipher" and inner.get_param("protected-headers") == "v1"
    # and which outer values a client sees instead (RFC 9788 section 2.2)
    shown = {str(v).partition(":")[0]: str(v).partition(": ")[2] for v in inner.get_all("HP-Outer") or []}
    assert shown["From"] == "hello@example.com" and shown["Subject"] == outer["Subject"]
    assert shown["To"] == "owner@example.net"


@pytest.mark.parametrize("make", [smime_owner, pgp_owner], ids=["smime", "pgp"])
def test_encryption_grows_a_large_forward_by_less_than_the_budget_allows(make: Callable[[], Any]) -> None:
    owner = make()
    key = parse(owner.pem if hasattr(owner, "pem") else owner.armored)
    blob = bytes(range(256)) * 8192  # 2 MB that does not compress
    msg = built(
        forward(attachments=[Attachment("attachments/c/m/a.bin", "a.bin")]), {"attachments/c/m/a.bin": blob}
    )
    plain = len(msg.as_bytes())
    assert len(encrypt(msg, key).as_bytes()) < plain * ENCRYPTION_GROWTH


def test_config_derives_the_parameter_and_shrinks_the_forward_budget_when_a_key_is_set() -> None:
    base = {"DOMAIN_NAME": "example.com", "ENVIRONMENT": "local"}
    assert not load(base).encrypts_to_owner and load(base).forward_budget == 40_000_000
    cfg = load({**base, "OWNER_SMIME_CERT": "/keys/owner.pem"})
    assert cfg.owner_key_parameter == "/service-email-handler/local/owner-key" and cfg.encrypts_to_owner
    assert cfg.forward_budget == int(40_000_000 / ENCRYPTION_GROWTH)
    with pytest.raises(ConfigError, match="not both"):
        load({**base, "OWNER_SMIME_CERT": "/a.pem", "OWNER_PGP_KEY": "/b.asc"})


def test_hide_correspondent_without_an_owner_key_is_refused_where_the_configuration_is_read() -> None:
    from common.runtime.config import AckSenderConfig, InboundHandlerConfig

    hidden = {
        "DOMAIN_NAME": "example.com",
        "ENVIRONMENT": "local",
        "PUBLIC_EMAIL": "hello@example.com,jobs@example.com",
        "PUBLIC_ADDRESSES": '{"jobs@example.com": {"hide_correspondent": true}}',
        "PRIVATE_EMAIL": "owner@example.net",
    }
    with pytest.raises(ConfigError, match=r"jobs@example\.com: hide_correspondent needs the owner's key"):
        load(hidden)  # the deploy and `email-handler dev`
    with pytest.raises(ConfigError, match="hide_correspondent needs the owner's key"):
        InboundHandlerConfig.load({**hidden, "THREAD_SECRET": "s" * 32})  # a handler's start
    assert load({**hidden, "OWNER_SMIME_CERT": "/keys/owner.pem"}).encrypts_to_owner  # with a key: served
    handler = InboundHandlerConfig.load(
        {**hidden, "THREAD_SECRET": "s" * 32, "OWNER_KEY_PARAMETER": "/service-email-handler/local/owner-key"}
    )
    assert handler.encrypts_to_owner
    # a function that never forwards (and is not told of the key) reads the setting without refusing it
    assert AckSenderConfig.load(hidden).public_addresses


def test_only_forward_sender_and_reply_handler_read_the_key_and_inbound_handler_knows_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "owner.pem"
    path.write_text(smime_owner().pem)
    monkeypatch.setattr(
        "deploy.lambdas.topic_arn", lambda cfg, name: f"arn:aws:sns:us-east-1:{ACCOUNT}:{name}"
    )
    cfg = load_config(environ(OWNER_SMIME_CERT=str(path)), "prd", "us-east-1", ACCOUNT)
    assert cfg.owner_key.startswith("-----BEGIN CERTIFICATE-----")  # read and checked by the deploy
    for name, spec in BY_NAME.items():
        env = environment(cfg, spec, {"OWNER_SMIME_CERT": str(path)})
        assert "OWNER_SMIME_CERT" not in env and "OWNER_KEY" not in env  # never the path or the text
        knows = ("inbound-handler", "forward-sender", "reply-handler")
        assert ("OWNER_KEY_PARAMETER" in env) == (name in knows), name
        reads = [
            s
            for s in policy_document(cfg, ACCOUNT, name)["Statement"]
            if any(r.endswith(cfg.owner_key_parameter) for r in s["Resource"])
        ]
        # forward-sender encrypts with it, reply-handler verifies opaque-signed replies with it
        assert bool(reads) == (name in ("forward-sender", "reply-handler")), name


REFUSED = {
    "an expired certificate": (lambda: smime_owner(not_after=NOW - dt.timedelta(days=1)).pem, "expired on"),
    "a signing-only certificate": (
        lambda: smime_owner(key_usage=signing_only()).pem,
        "lacks keyEncipherment",
    ),
    "a certificate for TLS servers": (
        lambda: smime_owner(purposes=[ExtendedKeyUsageOID.SERVER_AUTH]).pem,
        "lacks emailProtection",
    ),
    "an EC certificate": (lambda: smime_owner(curve=True).pem, "needs an RSA certificate"),
    "a 1024-bit RSA certificate": (lambda: smime_owner(key_size=1024).pem, "1024-bit RSA key, too weak"),
    # Made with gpg --quick-gen-key ... rsa1024 (pysequoia generates only keys its policy accepts).
    "a 1024-bit RSA OpenPGP key": (
        lambda: (Path(__file__).parents[1] / "fixtures" / "keys" / "openpgp-rsa1024.asc").read_text(),
        "RSA1024 is not considered secure",
    ),
    "an OpenPGP secret key": (lambda: str(pgp_owner().tsk), "give the public key only"),
    "neither": (lambda: "hello", "neither a PEM X.509 certificate"),
    "a damaged certificate": (
        lambda: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        "not a readable",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_key_that_cannot_encrypt_is_refused_at_deploy_with_the_reason(tmp_path: Path, case: str) -> None:
    make, reason = REFUSED[case]
    text = make()
    with pytest.raises(OwnerKeyError, match=reason):
        parse(text)
    path = tmp_path / "key"
    path.write_text(text)
    variable = "OWNER_PGP_KEY" if "PGP" in text else "OWNER_SMIME_CERT"
    with pytest.raises(DeployError, match=reason):
        load_config(environ(**{variable: str(path)}), "prd", "us-east-1", ACCOUNT)


def test_an_expired_openpgp_key_is_refused_and_a_current_one_summarised() -> None:
    owner = pgp_owner(validity_seconds=3600)
    key = parse(owner.armored)
    summary = key.summary()
    assert (
        summary["kind"] == "pgp"
        and summary["fingerprint"] == key.fingerprint
        and summary["expires"].endswith("Z")
    )
    assert summary["identity"] == "Owner <owner@example.net>"
    with pytest.raises(OwnerKeyError, match="expired on"):
        parse(owner.armored, now=NOW + dt.timedelta(hours=2))


def test_a_key_file_of_the_other_kind_or_missing_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "owner.asc"
    path.write_text(pgp_owner().armored)
    with pytest.raises(DeployError, match="OWNER_SMIME_CERT names a file holding an OpenPGP key"):
        load_config(environ(OWNER_SMIME_CERT=str(path)), "prd", "us-east-1", ACCOUNT)
    with pytest.raises(DeployError, match="cannot be read"):
        load_config(environ(OWNER_PGP_KEY=str(tmp_path / "missing.asc")), "prd", "us-east-1", ACCOUNT)


@pytest.mark.parametrize(
    ("ctype", "encrypted"),
    [
        ('multipart/encrypted; protocol="application/pgp-encrypted"; boundary=x', True),
        ("application/pkcs7-mime; smime-type=enveloped-data", True),
        ('application/x-pkcs7-mime; name="smime.p7m"', True),  # no smime-type: legacy clients' enveloped data
        ('application/pkcs7-mime; smime-type="authEnveloped-data"', True),
        ("application/pkcs7-mime; smime-type=signed-data", False),  # opaque-signed: readable, relayed
        ('multipart/signed; protocol="application/pgp-signature"', False),
        ("text/plain; charset=utf-8", False),
    ],
)
def test_an_encrypted_reply_is_recognised_by_its_content_type(ctype: str, encrypted: bool) -> None:
    from common.mail.encrypt import encrypted_kind

    assert bool(encrypted_kind(ctype)) is encrypted


def test_status_summarises_the_key_or_says_what_is_wrong() -> None:
    from common.mail.encrypt import status

    base = {"DOMAIN_NAME": "example.com"}
    assert status(load(base)) is None  # no key: mail to the owner is in clear
    good = status(load({**base, "OWNER_KEY": smime_owner().pem}))
    assert good is not None and good["kind"] == "smime" and len(good["fingerprint"]) == 64 and good["expires"]
    expired = status(load({**base, "OWNER_KEY": smime_owner(not_after=NOW - dt.timedelta(days=1)).pem}))
    assert expired is not None and "expired on" in expired["problem"]


def test_retention_days_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="RETENTION_ARCHIVE_DAYS must be a number of days"):
        load({"RETENTION_ARCHIVE_DAYS": "-1"})


def test_a_forward_that_would_not_fit_once_encrypted_links_its_attachment_instead() -> None:
    from common.delivery.compose import build_forward
    from common.mail.parse import parse as parse_mail
    from common.store.attachments import Stored

    base = {
        "DOMAIN_NAME": "example.com",
        "PUBLIC_EMAIL": "hello@example.com",
        "PRIVATE_EMAIL": "owner@example.net",
        "MAX_FORWARD_BYTES": "1000000",
    }
    raw = (
        b"From: Jane <jane@corp.example>\r\nTo: hello@example.com\r\n"
        b"Subject: CV\r\n\r\nMy CV is attached.\r\n"
    )
    cv = Attachment("attachments/c/m/cv.pdf", "cv.pdf", "application/pdf")
    stored = Stored([cv], {cv.key: 600_000})  # 822 KB once base64-encoded: fits 1 MB, not 1 MB / 1.4

    def forwarded(extra: dict[str, str]) -> OutboundMessage:
        return build_forward(
            load({**base, **extra}),
            "m1",
            "jane-at-corp.example",
            parse_mail(raw),
            stored,
            (),
            "conversations/c/m1.eml",
            "r@thread.example.com",
        )

    assert forwarded({}).attachments == [cv]
    encrypted = forwarded({"OWNER_SMIME_CERT": "/keys/owner.pem"})
    assert encrypted.attachments == [] and "cv.pdf (too large to forward; stored at s3://" in encrypted.text
