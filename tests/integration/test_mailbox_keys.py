"""Each mailbox's forward encrypted to its own key (MAILBOX_KEYS; docs/owner.md, "Several mailboxes"), on
the embedded stack with IAM enforced: the host reads the key files and the provisioning stores each key in
its own SSM parameter, as the deploy does; forward-sender reads them at cold start under its own role.

hello@example.com goes to P1 (an S/MIME certificate) and P2 (an OpenPGP key); jobs@example.com to the
same two and hides its correspondents; open@example.com to P3, who has no key; the catch-all to the owner,
whose key is another S/MIME certificate."""

from __future__ import annotations

import json
from collections.abc import Callable
from email import message_from_bytes, policy
from pathlib import Path

import pytest

from common.mail.encrypt import ENCRYPTED_TYPES
from deploy.preflight import with_key_files
from local.env import function_environment
from local.rie import RieProcess
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail
from tests.support.ownerkeys import PgpOwner, SmimeOwner, body_text, pgp_owner, smime_owner

P1, P2, P3, OWNER = "p1@partner1.example", "p2@partner2.example", "p3@partner3.example", "owner@example.net"
ADDRESSES = {
    "hello@example.com": {"forward_to": [P1, P2]},
    "jobs@example.com": {"forward_to": [P1, P2], "hide_correspondent": True},
    "open@example.com": {"forward_to": [P3]},
}
FUNCTIONS = ("inbound-handler", "forward-sender")
counter = iter(range(10_000))


class Keys:
    """The three keys of the module: P1's and the owner's certificates, P2's OpenPGP key."""

    def __init__(self, where: Path) -> None:
        self.p1, self.owner, self.p2 = smime_owner(), smime_owner(), pgp_owner()
        self.files = {
            "p1": where / "p1.pem",
            "owner": where / "owner.pem",
            "p2": where / "p2.asc",
        }
        self.files["p1"].write_text(self.p1.pem)
        self.files["owner"].write_text(self.owner.pem)
        self.files["p2"].write_text(self.p2.armored)

    def env(self, defaults: dict[str, str]) -> dict[str, str]:
        """The host's configuration: the owner's key file and each keyed mailbox's (P3 has none)."""
        return {
            **defaults,
            "PUBLIC_EMAIL": "hello@example.com,jobs@example.com,open@example.com,*@example.com",
            "PUBLIC_ADDRESSES": json.dumps(ADDRESSES),
            "OWNER_SMIME_CERT": str(self.files["owner"]),
            "MAILBOX_KEYS": json.dumps({P1: str(self.files["p1"]), P2: str(self.files["p2"])}),
            "RETRY_DELAYS_SECONDS": "0",
            "MAX_RECEIVE_COUNT": "1",
        }


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture
def keyed(moto_server: str, local_defaults: dict[str, str], keys: Keys) -> Stack:
    """The stack provisioned as `email-handler dev` does: the keys read from their files and stored."""
    stack = Stack(moto_server, keys.env(local_defaults))
    stack.cfg = with_key_files(stack.cfg)
    return stack.reset()


@pytest.fixture
def fns(
    keyed: Stack, rie_module: Callable[..., RieProcess], local_defaults: dict[str, str], keys: Keys
) -> dict[str, RieProcess]:
    """The functions with the variables the local modes give them (KEYED_MAILBOXES, the owner key's
    parameter), started once the keys are stored; forward-sender reads them at its cold start."""
    given = function_environment(keys.env(local_defaults))
    assert given["KEYED_MAILBOXES"] == f"{P1},{P2}"
    # not the local admin's credentials: each function runs with its own role's (rie_module), as on Lambda
    env = {k: v for k, v in given.items() if not k.startswith("AWS_")}
    return {name: rie_module(name, env=env) for name in FUNCTIONS}


def write_in(stack: Stack, fns: dict[str, RieProcess], to: str, subject: str) -> None:
    raw = mail(sender="Jane Smith <jane@corp.example>", to=to, subject=subject, text=f"Hello, {subject}.")
    result = fns["inbound-handler"].invoke(stack.receipt(raw, f"k{next(counter):039d}", to=to))
    assert result["status"] == "forwarded", result


def received(stack: Stack, who: str, fns: dict[str, RieProcess]) -> list[SentMail]:
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    return [m for m in stack.sent() if m.destinations == [who]]


def content_type(sent: SentMail) -> str:
    return message_from_bytes(sent.raw, policy=policy.default).get_content_type()


def cannot_decrypt(key: SmimeOwner, sent: SentMail) -> bool:
    try:
        key.decrypt(sent.raw)
    except ValueError:  # cryptography: no recipient of the enveloped data matches this certificate
        return True
    return False


def test_each_mailbox_gets_its_forward_encrypted_to_its_own_key_and_a_mailbox_without_one_in_clear(
    keyed: Stack, fns: dict[str, RieProcess], keys: Keys
) -> None:
    write_in(keyed, fns, "hello@example.com", "Mail for the partners")
    [to_p1] = received(keyed, P1, fns)
    [to_p2] = received(keyed, P2, fns)
    # P1's forward: S/MIME to P1's certificate; neither the owner's certificate nor P2's key opens it
    assert content_type(to_p1) == "application/pkcs7-mime" and b"Mail for the partners" not in to_p1.raw
    inner = keys.p1.decrypt(to_p1.raw)
    assert inner["Subject"] == "Mail for the partners" and "Hello, Mail for the partners." in body_text(inner)
    assert cannot_decrypt(keys.owner, to_p1)
    # P2's forward: PGP/MIME to P2's key, the same conversation's thread address inside and out
    assert content_type(to_p2) == "multipart/encrypted" and b"Mail for the partners" not in to_p2.raw
    inner2 = keys.p2.decrypt(to_p2.raw)
    assert "Hello, Mail for the partners." in body_text(inner2)
    assert inner2["Reply-To"] == inner["Reply-To"] == to_p1.message["Reply-To"]
    # P3 has no key: its forward goes in clear, as before MAILBOX_KEYS
    write_in(keyed, fns, "open@example.com", "Mail for P3")
    [to_p3] = received(keyed, P3, fns)
    assert content_type(to_p3) not in ENCRYPTED_TYPES and "Hello, Mail for P3." in body_text(to_p3.message)
    # the owner's forward (the catch-all): still to the owner's key, which P1's certificate does not open
    write_in(keyed, fns, "someone@example.com", "Mail for the owner")
    [to_owner] = received(keyed, OWNER, fns)
    assert "Hello, Mail for the owner." in body_text(keys.owner.decrypt(to_owner.raw))
    assert cannot_decrypt(keys.p1, to_owner)


def test_an_address_hiding_its_correspondents_delivers_to_its_keyed_mailboxes_encrypted(
    keyed: Stack, fns: dict[str, RieProcess], keys: Keys
) -> None:
    """Before MAILBOX_KEYS such a forward to a partner's mailbox was dead-lettered (HideNeedsEncryption)."""
    write_in(keyed, fns, "jobs@example.com", "A role you may like")
    [to_p1] = received(keyed, P1, fns)
    [to_p2] = received(keyed, P2, fns)
    pairs: tuple[tuple[SentMail, SmimeOwner | PgpOwner], ...] = ((to_p1, keys.p1), (to_p2, keys.p2))
    for sent, key in pairs:
        outer = sent.message
        # the provider sees the public address, a neutral subject, no contact
        assert str(outer["From"]) == "jobs@example.com" and outer["Subject"] == "[...]"
        assert b"jane@corp.example" not in sent.raw and b"Jane Smith" not in sent.raw
        assert b"A role you may like" not in sent.raw
        inner = key.decrypt(sent.raw)
        assert inner["Subject"] == "A role you may like" and "Jane Smith" in str(inner["From"])
    assert keyed.peek(f"{keyed.cfg.forward_queue}-dlq") == []
    assert "HideNeedsEncryption" not in fns["forward-sender"].output()
