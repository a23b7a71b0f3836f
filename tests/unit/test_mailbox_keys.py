"""MAILBOX_KEYS (docs/owner.md, "Several mailboxes"): each forward_to mailbox's own key, read on the host,
checked at deploy with the mailbox named, stored one SSM parameter per mailbox, given to forward-sender
alone; hide_correspondent needs a key for every mailbox of its address."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.mail.encrypt import OwnerKeyError, parse
from common.runtime.config import ForwardSenderConfig, InboundHandlerConfig
from deploy.config import key_files, load
from deploy.errors import DeployError
from deploy.functions import BY_NAME
from deploy.iam import policy as policy_document
from deploy.lambdas import environment
from deploy.preflight import load_config
from tests.support.ownerkeys import NOW, pgp_owner, smime_owner
from tests.unit.test_preflight import ACCOUNT, environ

P1, P2, P3 = "p1@partner1.example", "P2@partner2.example", "p3@partner3.example"
ADDRESSES = json.dumps(
    {
        "hello@example.com": {"forward_to": [P1, P2]},
        "jobs@example.com": {"forward_to": [P3], "hide_correspondent": True},
    }
)
BASE = {
    "DOMAIN_NAME": "example.com",
    "ENVIRONMENT": "local",
    "PUBLIC_EMAIL": "hello@example.com",
    "PUBLIC_ADDRESSES": ADDRESSES,
    "PRIVATE_EMAIL": "owner@example.net",
}


def test_key_files_reads_a_json_object_of_mailbox_to_path_and_names_what_is_wrong() -> None:
    assert key_files("") == {}
    assert key_files(json.dumps({P2: " /keys/p2.pem ", P1: "/keys/p1.asc"})) == {
        "p2@partner2.example": "/keys/p2.pem",
        P1: "/keys/p1.asc",
    }
    for text, reason in (
        ("{", "MAILBOX_KEYS is not JSON"),
        ('["/keys/p1.pem"]', "must be a JSON object"),
        ('{"not-an-address": "/k"}', "'not-an-address' is not an ASCII email address"),
        (json.dumps({P1: ""}), f"{P1}: give the path of its key file"),
        (json.dumps({P1: 3}), f"{P1}: give the path of its key file"),
        ('{"a@x.example": "/k", "A@x.example": "/k2"}', "A@x.example is given twice"),
    ):
        with pytest.raises(ConfigError, match=reason):
            key_files(text)


def test_mailbox_keys_name_only_forward_to_mailboxes_and_never_the_owners() -> None:
    keys = json.dumps({P1: "/k/p1.pem", P3: "/k/p3.asc"})
    cfg = load({**BASE, "MAILBOX_KEYS": keys})
    assert cfg.keyed_mailboxes == (P1, P3)
    assert cfg.has_key(P1) and cfg.has_key(P3.upper()) and not cfg.has_key(P2)
    assert not cfg.has_key("owner@example.net")  # the owner's mailbox: the owner's key, and there is none
    assert cfg.forward_budget < cfg.max_forward_bytes  # a keyed mailbox's forwards are encrypted too
    # one parameter per mailbox, under the deployment's prefix, named without the address
    names = {cfg.mailbox_key_parameter(b) for b in (P1, P3, P3.upper())}
    assert len(names) == 2 and all(n.startswith("/service-email-handler/local/mailbox-key/") for n in names)
    assert not any("@" in n or "partner" in n for n in names)
    with pytest.raises(ConfigError, match="owner@example.net is the owner's mailbox"):
        load({**BASE, "MAILBOX_KEYS": json.dumps({"owner@example.net": "/k.pem"})})
    with pytest.raises(ConfigError, match="stranger@x.example is not a mailbox of any public address"):
        load({**BASE, "MAILBOX_KEYS": json.dumps({"stranger@x.example": "/k.pem", P3: "/k3.pem"})})


def test_hide_correspondent_needs_a_key_for_each_of_its_mailboxes_at_deploy_and_at_start() -> None:
    # jobs@ hides its correspondents and goes to P3 alone: P3 needs its own key, the owner's does not do
    with pytest.raises(
        ConfigError, match=rf"jobs@example\.com: hide_correspondent needs a key .*{P3} has none"
    ):
        load({**BASE, "OWNER_SMIME_CERT": "/keys/owner.pem"})
    with pytest.raises(ConfigError, match=f"{P3} has none"):
        InboundHandlerConfig.load({**BASE, "THREAD_SECRET": "s" * 32})
    assert load({**BASE, "MAILBOX_KEYS": json.dumps({P3: "/k/p3.pem"})}).has_key(P3)
    started = InboundHandlerConfig.load({**BASE, "THREAD_SECRET": "s" * 32, "KEYED_MAILBOXES": P3})
    assert started.keyed_mailboxes == (P3,)
    # an address hiding its correspondents whose mailboxes are the owner's and a partner's: both keyed
    both = json.dumps(
        {"jobs@example.com": {"forward_to": ["owner@example.net", P3], "hide_correspondent": True}}
    )
    with pytest.raises(ConfigError, match="hide_correspondent needs the owner's key"):
        load({**BASE, "PUBLIC_ADDRESSES": both, "MAILBOX_KEYS": json.dumps({P3: "/k/p3.pem"})})
    assert load(
        {**BASE, "PUBLIC_ADDRESSES": both, "MAILBOX_KEYS": json.dumps({P3: "/k"}), "OWNER_PGP_KEY": "/o"}
    ).encrypts_to_owner


def test_the_deploy_reads_each_key_file_and_refuses_one_that_cannot_encrypt_naming_the_mailbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "deploy.lambdas.topic_arn", lambda cfg, name: f"arn:aws:sns:us-east-1:{ACCOUNT}:{name}"
    )
    (tmp_path / "p1.pem").write_text(smime_owner().pem)
    (tmp_path / "p3.asc").write_text(pgp_owner().armored)
    keys = json.dumps({P1: str(tmp_path / "p1.pem"), P3: str(tmp_path / "p3.asc")})
    extra = {"PUBLIC_ADDRESSES": ADDRESSES, "MAILBOX_KEYS": keys}
    cfg = load_config(environ(**extra), "prd", "us-east-1", ACCOUNT)
    texts = dict(cfg.mailbox_key_texts)
    assert texts[P1].startswith("-----BEGIN CERTIFICATE-----") and "PGP PUBLIC KEY" in texts[P3]
    assert parse(cfg.mailbox_key(P3), whose=P3).kind == "pgp" and cfg.mailbox_key(P2) == ""
    for name, spec in BY_NAME.items():
        env = environment(cfg, spec, environ(**extra))
        assert "MAILBOX_KEYS" not in env and not any("BEGIN" in v for v in env.values())  # no path, no key
        knows = name in ("inbound-handler", "forward-sender", "reply-handler")
        assert (env.get("KEYED_MAILBOXES") == f"{P1},{P3}") == knows, name
        granted = {
            r
            for s in policy_document(cfg, ACCOUNT, name)["Statement"]
            for r in s["Resource"]
            if "/mailbox-key/" in r
        }
        # forward-sender alone reads them, each by its own parameter
        expected = {
            f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter{cfg.mailbox_key_parameter(b)}" for b in (P1, P3)
        }
        assert granted == (expected if name == "forward-sender" else set()), name
        if name == "forward-sender":  # and it starts on that environment, knowing which mailboxes are keyed
            assert ForwardSenderConfig.load(env).keyed_mailboxes == (P1, P3)
    # a key that cannot encrypt stops the deploy, naming the mailbox and why
    (tmp_path / "old.pem").write_text(smime_owner(not_after=NOW - dt.timedelta(days=1)).pem)
    bad = {**extra, "MAILBOX_KEYS": json.dumps({P1: str(tmp_path / "old.pem"), P3: str(tmp_path / "p3.asc")})}
    with pytest.raises(DeployError, match=rf"a mailbox's key: .*MAILBOX_KEYS, {P1}.*expired on"):
        load_config(environ(**bad), "prd", "us-east-1", ACCOUNT)
    missing = {
        **extra,
        "MAILBOX_KEYS": json.dumps({P1: str(tmp_path / "none.pem"), P3: str(tmp_path / "p3.asc")}),
    }
    with pytest.raises(DeployError, match=rf"MAILBOX_KEYS \({P1}\).*cannot be read"):
        load_config(environ(**missing), "prd", "us-east-1", ACCOUNT)
    with pytest.raises(OwnerKeyError, match=f"mailbox {P1}'s key is neither"):
        parse("hello", whose=P1)
