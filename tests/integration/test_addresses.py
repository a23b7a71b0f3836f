"""Several public addresses and a catch-all (docs/owner.md "Several public addresses"), on the
embedded stack with IAM enforced: the local defaults serve hello@example.com (ack on),
jobs@example.com (ack on, its own subject) and a catch-all for example.com (no ack).

Each function runs under the real RIE with its own role's credentials; the senders consume their
queues as the event-source mapping would; what went out is read back from SES."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

import pytest

from common.mail.outbound import OutboundMessage
from common.store.sendqueue import enqueue
from local.rie import RieProcess
from tests.conftest import REPO
from tests.support.harness import SentMail, Stack
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
FUNCTIONS = ("inbound-handler", "reply-handler", "ack-sender", "forward-sender", "reply-sender")
QUEUES = {"ack-sender": "ack_queue", "forward-sender": "forward_queue", "reply-sender": "reply_queue"}


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {name: rie_module(name, env={"RETRY_DELAYS_SECONDS": "0"}) for name in FUNCTIONS}


def flush(stack: Stack, fns: dict[str, RieProcess]) -> None:
    """Every sender drains its queue, as the event-source mappings would."""
    for name, queue in QUEUES.items():
        stack.run_sender(fns[name], getattr(stack.cfg, queue))


def write_in(
    stack: Stack, fns: dict[str, RieProcess], sender: str, to: str, n: int, header_to: str | None = None
) -> Any:
    """``sender`` writes to ``to`` (SES's receipt recipients); the To header says ``header_to``."""
    raw = mail(sender=sender, to=header_to or to, subject=f"Mail {n}", text=f"Hello, mail {n}.")
    return fns["inbound-handler"].invoke(stack.receipt(raw, f"{n:040d}", to=to))


def answer(stack: Stack, fns: dict[str, RieProcess], thread: str, n: int, text: str = "Thanks!") -> Any:
    raw = mail(sender=OWNER, to=thread, subject=f"Re: Mail {n}", text=text)
    return fns["reply-handler"].invoke(
        stack.receipt(raw, f"r{n:039d}", to=thread, source="owner@example.net")
    )


def sent(stack: Stack, to: str) -> list[SentMail]:
    return [m for m in stack.sent() if to in m.destinations]


def cli(stack: Stack, *args: str, command: str = "address") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops.main", *command.split(), *args, "--endpoint", stack.url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_each_address_gets_its_own_ack_label_and_reply_address(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    people = [
        ("Jane <jane@corp.example>", "hello@example.com"),
        ("Bob <bob@corp.example>", "jobs@example.com"),
        ("Carl <carl@shop.example>", "shop-z@example.com"),  # no such address: the catch-all's
    ]
    for n, (sender, to) in enumerate(people, 1):
        assert write_in(stack, fns, sender, to, n)["status"] == "forwarded"
    flush(stack, fns)

    # acks: from the address written to, with its own subject; none from the catch-all
    [jane_ack] = sent(stack, "jane@corp.example")
    [bob_ack] = sent(stack, "bob@corp.example")
    assert (jane_ack.source, jane_ack.message["Subject"]) == ("hello@example.com", "Thanks for your message")
    assert (bob_ack.source, bob_ack.message["Subject"]) == ("jobs@example.com", "Thanks for your application")
    assert jane_ack.message["From"].addresses[0].addr_spec == "hello@example.com"
    assert sent(stack, "carl@shop.example") == []

    # forwards: sent from and labelled with the address written to
    forwards = {m.message["Subject"]: m for m in sent(stack, "owner@example.net")}
    labels = {
        "Mail 1": "[!] Written to hello@example.com\n",
        "Mail 2": "[!] Written to jobs@example.com (jobs)\n",
        "Mail 3": "[!] Written to shop-z@example.com (to: unknown address)\n",
    }
    for (subject, label), (_, to) in zip(labels.items(), people, strict=True):
        forward = forwards[subject]
        assert forward.source == to and label in forward.message.get_body(("plain",)).get_content()
    records = {
        r["senderEmail"]: r["publicAddress"]
        for r in (stack.conversation(c) for c in ("jane-at-corp.example", "bob-at-corp.example"))
        if r
    }
    assert records == {"jane@corp.example": "hello@example.com", "bob@corp.example": "jobs@example.com"}

    # the owner answers each forward: each reply goes out from the address its contact wrote to
    for n in range(1, len(people) + 1):
        thread = forwards[f"Mail {n}"].message["Reply-To"].addresses[0].addr_spec
        assert answer(stack, fns, thread, n)["status"] == "queued"
    flush(stack, fns)
    replies = {m.destinations[0]: m for m in stack.sent() if m.message["Subject"].startswith("Re: Mail")}
    assert {contact: m.source for contact, m in replies.items()} == {
        "jane@corp.example": "hello@example.com",
        "bob@corp.example": "jobs@example.com",
        "carl@shop.example": "shop-z@example.com",
    }
    assert all(m.message["From"].addresses[0].addr_spec == m.source for m in replies.values())

    listed = {r["address"]: r for r in json.loads(cli(stack, "list", "--json").stdout)}
    assert listed["jobs@example.com"]["conversations"] == 1 and listed["*@example.com"]["conversations"] == 1
    assert listed["*@example.com"]["kind"] == "catch-all" and listed["hello@example.com"]["kind"] == "listed"


def test_a_disabled_address_quarantines_and_an_added_one_is_labelled(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    done = cli(stack, "disable", "shop-y@example.com")
    assert done.returncode == 0, done.stderr
    refused = cli(stack, "disable", "jobs@example.com")  # listed in PUBLIC_EMAIL: a redeploy removes it
    assert refused.returncode == 2 and "listed in PUBLIC_EMAIL" in refused.stderr
    assert cli(stack, "add", "shop-a@example.com", "--note", "Shop A").returncode == 0

    held = write_in(stack, fns, "Dan <dan@shop.example>", "shop-y@example.com", 11)
    assert (held["status"], held["reason"]) == ("quarantined", "address disabled (shop-y@example.com)")
    assert write_in(stack, fns, "Eve <eve@shopa.example>", "shop-a@example.com", 12)["status"] == "forwarded"
    flush(stack, fns)
    assert (
        sent(stack, "dan@shop.example") == [] and sent(stack, "eve@shopa.example") == []
    )  # no ack, no bounce
    [forward] = sent(stack, "owner@example.net")  # only Eve's
    assert "[!] Written to shop-a@example.com (Shop A)" in forward.message.get_body(("plain",)).get_content()

    rows = {r["address"]: r for r in json.loads(cli(stack, "list", "--json").stdout)}
    assert (rows["shop-y@example.com"]["state"], rows["shop-y@example.com"]["quarantined"]) == ("disabled", 1)
    assert (rows["shop-a@example.com"]["label"], rows["shop-a@example.com"]["conversations"]) == ("Shop A", 1)
    table = cli(stack, "list").stdout
    assert "shop-y@example.com" in table and "disabled" in table

    # the owner's side names the address: `quarantine show`, `conversations`, the digest
    shown = cli(stack, _held_id(stack), command="quarantine show").stdout
    assert "address:        shop-y@example.com" in shown
    contacts = json.loads(cli(stack, "--json", command="conversations").stdout)
    assert [(c["senderEmail"], c["publicAddress"]) for c in contacts] == [
        ("eve@shopa.example", "shop-a@example.com")
    ]
    from common.delivery.quarantine import send_digest

    assert send_digest(stack.cfg)["count"] == 1
    flush(stack, fns)
    [digest] = [m for m in sent(stack, "owner@example.net") if m.message["Subject"].startswith("Quarantine")]
    assert (
        "1. Dan <dan@shop.example>\n   To:       shop-y@example.com\n"
        in digest.message.get_body(("plain",)).get_content()
    )

    # the owner can still release the held mail: forwarded, labelled with its address, never acked
    from common.delivery import release

    assert release.release(stack.cfg, _held_id(stack), "test")["status"] == "released"
    flush(stack, fns)
    released = [m for m in sent(stack, "owner@example.net") if m.message["Subject"] == "Mail 11"]
    assert "[!] Written to shop-y@example.com" in released[0].message.get_body(("plain",)).get_content()
    assert sent(stack, "dan@shop.example") == []


def _held_id(stack: Stack) -> str:
    from common.store import quarantine

    [item] = [i for i in quarantine.everything(stack.cfg) if i.get("address") == "shop-y@example.com"]
    return str(item["id"])


def test_a_removed_address_leaves_its_conversations_answerable(
    stack: Stack, fns: dict[str, RieProcess], rie_function: Callable[..., RieProcess]
) -> None:
    assert write_in(stack, fns, "Bob <bob@corp.example>", "jobs@example.com", 21)["status"] == "forwarded"
    flush(stack, fns)
    thread = sent(stack, "owner@example.net")[0].message["Reply-To"].addresses[0].addr_spec
    # jobs@ and the catch-all are removed from the configuration (a redeploy): only hello@ is served
    only_hello = {"PUBLIC_EMAIL": "hello@example.com", "PUBLIC_ADDRESSES": "", "RETRY_DELAYS_SECONDS": "0"}
    reply_handler = rie_function("reply-handler", env=only_hello)
    reply_sender = rie_function("reply-sender", env=only_hello)
    assert answer(stack, {"reply-handler": reply_handler}, thread, 21)["status"] == "queued"
    stack.run_sender(reply_sender, stack.cfg.reply_queue)
    [reply] = [m for m in sent(stack, "bob@corp.example") if m.message["Subject"] == "Re: Mail 21"]
    # answered, from the default address: jobs@ no longer receives, so Bob's answer would be lost there
    assert reply.source == "hello@example.com"
    # and mail to the removed address is no longer taken in
    inbound = rie_function("inbound-handler", env=only_hello)
    raw = mail(sender="Bob <bob@corp.example>", to="jobs@example.com", subject="Again")
    result = inbound.invoke(stack.receipt(raw, f"{22:040d}", to="jobs@example.com"))
    assert (result["status"], result["reason"]) == ("dropped", "recipient is not the public address")


def test_a_contact_cannot_choose_the_sending_address(stack: Stack, fns: dict[str, RieProcess]) -> None:
    # SES delivered it to hello@ (its receipt recipients); the sender's headers name jobs@ and ask for it
    raw = mail(
        sender="Mallory <mallory@corp.example>",
        to="jobs@example.com",
        subject="Mail 31",
        text="[from: jobs@example.com]\nReply from jobs please.",
        headers={"Cc": "other@example.com", "Delivered-To": "jobs@example.com"},
    )
    result = fns["inbound-handler"].invoke(stack.receipt(raw, f"{31:040d}", to="hello@example.com"))
    assert result["status"] == "forwarded"
    flush(stack, fns)
    [ack] = sent(stack, "mallory@corp.example")
    assert ack.source == "hello@example.com" and ack.message["Subject"] == "Thanks for your message"
    [forward] = sent(stack, "owner@example.net")
    assert "[!] Written to hello@example.com\n" in forward.message.get_body(("plain",)).get_content()
    thread = forward.message["Reply-To"].addresses[0].addr_spec
    assert answer(stack, fns, thread, 31)["status"] == "queued"
    flush(stack, fns)
    [reply] = [m for m in sent(stack, "mallory@corp.example") if m.message["Subject"] == "Re: Mail 31"]
    assert reply.source == "hello@example.com"

    # Nor can anything that reaches a queue: a message naming an address this system does not serve
    # is dead-lettered by the sender, never sent.
    rogue = OutboundMessage(
        kind="reply",
        idempotency_key="reply:rogue",
        correlation_id="reply-rogue",
        to=["mallory@corp.example"],
        subject="rogue",
        text="x",
        from_address="ceo@other.example",
    )
    enqueue(stack.cfg.reply_queue, rogue, stack.cfg.bucket, stack.cfg.claim_check_bytes)
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    assert not [m for m in stack.sent() if m.message["Subject"] == "rogue"]
    assert "not a public address" in fns["reply-sender"].output()


def test_the_owner_starts_a_conversation_from_a_chosen_address(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    new = "new@thread.example.com"
    for n, (text, expected) in enumerate(
        [
            ("[to: zoe@corp.example]\n[from: jobs@example.com]\nHello Zoe.", "jobs@example.com"),
            ("[to: yan@corp.example]\nHello Yan.", "hello@example.com"),  # the default: the first
        ],
        41,
    ):
        raw = mail(sender=OWNER, to=new, subject=f"Start {n}", text=text)
        assert (
            fns["reply-handler"].invoke(stack.receipt(raw, f"r{n:039d}", to=new, source="owner@example.net"))[
                "status"
            ]
            == "started"
        )
        flush(stack, fns)
        [started] = [m for m in stack.sent() if m.message["Subject"] == f"Start {n}"]
        assert started.source == expected
        assert "[from:" not in started.message.get_body(("plain",)).get_content()
    raw = mail(
        sender=OWNER,
        to=new,
        subject="Start 43",
        text="[to: ann@corp.example]\n[from: boss@other.example]\nHi",
    )
    refused = fns["reply-handler"].invoke(
        stack.receipt(raw, f"r{43:039d}", to=new, source="owner@example.net")
    )
    assert (
        refused["status"] == "rejected" and "not one of this system's public addresses" in refused["reason"]
    )


@pytest.mark.parametrize(
    "forward",
    [
        # Gmail's forward: a separator, then the original's header block.
        "---------- Forwarded message ---------\nFrom: Eve <eve@corp.example>\n"
        "Date: Mon, 3 Nov 2026 at 10:00\nSubject: Role\nTo: Owner <owner@example.net>\n\n",
        # An unknown client's header in an unknown language: found by its shape alone.
        "Kutoka: Eve <eve@corp.example>\nKwa: Owner <owner@example.net>\n\n",
    ],
)
def test_a_from_line_in_a_mail_the_owner_forwards_to_new_chooses_nothing(
    stack: Stack, fns: dict[str, RieProcess], forward: str
) -> None:
    """[to:] and [from:] come from the owner's own lines only (common.reply.text.command_lines): a
    [from: …] line inside the forwarded mail never picks the public address the conversation is
    written from; the owner's own [from: …] above the forward does."""
    new = "new@thread.example.com"
    n = 61 if forward.startswith("-") else 63
    cases = [  # (the owner's own lines, the line planted in the forwarded mail, the address expected)
        ("", "[from: jobs@example.com]", "hello@example.com"),
        ("[from: jobs@example.com]\n", "[from: hello@example.com]", "jobs@example.com"),
    ]
    for k, (own, planted, expected) in enumerate(cases):
        text = f"[to: zed{n + k}@corp.example]\n{own}Please answer Eve.\n\n{forward}{planted}\nHi\n"
        raw = mail(sender=OWNER, to=new, subject=f"Start {n + k}", text=text)
        result = fns["reply-handler"].invoke(
            stack.receipt(raw, f"r{n + k:039d}", to=new, source="owner@example.net")
        )
        assert result["status"] == "started", result
        flush(stack, fns)
        [started] = [m for m in stack.sent() if m.message["Subject"] == f"Start {n + k}"]
        assert started.source == expected and started.destinations == [f"zed{n + k}@corp.example"]
        assert "Please answer Eve." in started.message.get_body(("plain",)).get_content()


def test_a_block_entry_for_one_address_leaves_the_others(stack: Stack, fns: dict[str, RieProcess]) -> None:
    """The lists stay global; `--to` makes an entry for mail to one public address only."""
    done = cli(stack, "@agency.example", "--to", "jobs@example.com", command="block")
    assert done.returncode == 0, done.stderr
    refused = cli(stack, "@agency.example", "--to", "ceo@other.example", command="block")
    assert refused.returncode == 2 and "not one of this system's public addresses" in refused.stderr
    held = write_in(stack, fns, "Rae <rae@agency.example>", "jobs@example.com", 51)
    assert (held["status"], held["reason"]) == (
        "quarantined",
        "blocked by the owner (@agency.example to jobs@example.com)",
    )
    assert write_in(stack, fns, "Rae <rae@agency.example>", "hello@example.com", 52)["status"] == "forwarded"
    # an allow entry for the address itself, to jobs@, is more specific than the domain's block
    assert cli(stack, "rae@agency.example", "--to", "jobs@example.com", command="allow").returncode == 0
    assert write_in(stack, fns, "Rae <rae@agency.example>", "jobs@example.com", 53)["status"] == "forwarded"
    entries = {e["entry"]: e["list"] for e in json.loads(cli(stack, "--json", command="block").stdout)}
    assert entries == {"@agency.example to jobs@example.com": "block"}
    assert cli(stack, "@agency.example", "--to", "jobs@example.com", command="unblock").returncode == 0
    assert json.loads(cli(stack, "--json", command="block").stdout) == []


@pytest.mark.parametrize(
    ("public", "recipients", "condition"),
    [
        # one address: the rule and the condition of before
        (
            "hello@example.com",
            ["hello@example.com"],
            {"StringEquals": {"ses:FromAddress": "hello@example.com"}},
        ),
        (
            "hello@example.com,jobs@example.com",
            ["hello@example.com", "jobs@example.com"],
            {"StringEquals": {"ses:FromAddress": ["hello@example.com", "jobs@example.com"]}},
        ),
        # a catch-all: the domain (SES: every address at it, not its subdomains: thread.* stays apart)
        (
            "hello@example.com,*@example.com",
            ["example.com"],
            {"StringLike": {"ses:FromAddress": "*@example.com"}},
        ),
    ],
)
def test_the_deploy_plans_receipt_rules_and_send_rights_for_every_address(
    env: dict[str, str], public: str, recipients: list[str], condition: dict[str, Any]
) -> None:
    from common.aws import client
    from tests.support.deploy import PREFIX, run

    run({**env, "PUBLIC_EMAIL": public, "PUBLIC_ADDRESSES": ""})
    thread, rule = client("ses").describe_receipt_rule_set(RuleSetName=PREFIX)["Rules"]
    # the public rule names the thread domain too (deploy/receiving.py, common/store/staging.py)
    assert thread["Recipients"] == ["thread.example.com"]
    assert rule["Recipients"] == [*recipients, "thread.example.com"]
    for sender in ("ack-sender", "forward-sender", "reply-sender"):
        doc = client("iam").get_role_policy(RoleName=f"{PREFIX}-{sender}", PolicyName="least-privilege")[
            "PolicyDocument"
        ]
        doc = json.loads(urllib.parse.unquote(doc)) if isinstance(doc, str) else doc
        sends = [s for s in doc["Statement"] if "ses:SendRawEmail" in s["Action"]]
        assert len(sends) == 2 and all(s["Condition"] == condition for s in sends)
    variables = client("lambda").get_function_configuration(FunctionName=f"{PREFIX}-inbound-handler")[
        "Environment"
    ]["Variables"]
    assert variables["PUBLIC_EMAIL"] == public


def test_a_disabled_address_covers_its_sub_addresses(stack: Stack, fns: dict[str, RieProcess]) -> None:
    """RFC 5233 sub-addressing: disabling shop-z@ holds mail to shop-z+anything@ too, in any case; a
    sub-address of an active address, and another address beginning alike, still get through."""
    assert cli(stack, "disable", "shop-z@example.com").returncode == 0
    for n, tagged in enumerate(("shop-z+news@example.com", "Shop-Z+X@Example.com"), 31):
        held = write_in(stack, fns, "Dan <dan@shop.example>", tagged, n)
        assert (held["status"], held["reason"]) == ("quarantined", "address disabled (shop-z@example.com)")
    assert cli(stack, "add", "shop-w@example.com", "--note", "Shop W").returncode == 0
    for n, other in enumerate(("shop-w+x@example.com", "shop-zz@example.com"), 33):
        assert write_in(stack, fns, "Eve <eve@shopw.example>", other, n)["status"] == "forwarded"
