"""The owner's side end to end on `email-handler dev`: mail over SMTP, the owner's replies over SMTP,
and every owner/operator command of the CLI (`quarantine`, `block`/`allow`/`unblock`, `suppression`,
`dlq`, `conversations`) run as a user runs them, against the same emulator."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest

from common.aws import client
from common.delivery.compose import FORWARD_MARKER
from deploy import config, resources
from deploy.config import Config
from local.env import aws_endpoint, local_env
from tests.conftest import REPO
from tests.support.devproc import DevProcess
from tests.support.mailgen import mail
from tests.support.scenario import LocalSystem, _message, wait_for

OWNER = "Owner Name <owner@example.net>"


class Cli:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "ops.main", *args, "--endpoint", self.endpoint],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if ok:
            assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalSystem, Cli, Config]]:
    process = DevProcess(tmp_path_factory.mktemp("dev-logs")).start()
    try:
        env = local_env()
        with aws_endpoint(process.endpoint, env):
            yield (
                LocalSystem(smtp_port=process.smtp, endpoint=process.endpoint),
                Cli(process.endpoint),
                config.load(env),
            )
    finally:
        process.stop()


def sent_to(system: LocalSystem, address: str, count: int = 1) -> list:
    return wait_for(
        f"{count} mail(s) to {address}",
        lambda: (lambda found: found if len(found) >= count else None)(
            [_message(i) for i in system.outbox() if address in i["destinations"]]
        ),
    )


@pytest.mark.timeout(900)
def test_owner_side_over_smtp_and_the_cli(dev: tuple[LocalSystem, Cli, Config]) -> None:
    system, cli, cfg = dev
    # 1. A faithful forward: inline image beside the HTML, a .txt attachment, the header block, an .exe
    # withheld.
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "Jane Smith <jane@corp.example>", cfg.public_email, "Our logo"
    msg["Cc"] = "Bob <bob@corp.example>"
    msg.set_content("See the logo.")
    msg.add_alternative('<html><body><img src="cid:logo@corp.example"></body></html>', subtype="html")
    msg.get_body(("html",)).add_related(
        b"\x89PNG logo", maintype="image", subtype="png", cid="<logo@corp.example>"
    )
    msg.add_attachment(b"notes", maintype="text", subtype="plain", filename="notes.txt")
    msg.add_attachment(b"MZ", maintype="application", subtype="octet-stream", filename="tool.exe")
    system.send("jane@corp.example", cfg.public_email, msg.as_bytes())
    [forward] = sent_to(system, "owner@example.net")
    assert forward["Subject"] == "Our logo"
    assert any(p.get_content_type() == "multipart/related" for p in forward.walk())
    assert [p.get_filename() for p in forward.iter_attachments()] == ["notes.txt"]
    text = forward.get_body(("plain",)).get_content()
    assert text.startswith(
        f"{FORWARD_MARKER}\n[!] Written to hello@example.com\n\nFrom: Jane Smith <jane@corp.example>\n"
    )
    assert "Cc: Bob <bob@corp.example>" in text
    assert "tool.exe (denied type .exe; stored at s3://" in text
    thread = forward["Reply-To"].addresses[0].addr_spec

    # 2. The owner blocks Jane's domain in a reply that holds nothing else: nothing goes to Jane.
    system.send(
        "owner@example.net",
        thread,
        mail(sender=OWNER, to=thread, subject="Re: Our logo", text="[block: domain]\n"),
    )
    wait_for("the block entry", lambda: [e for e in cli.json("block") if e["entry"] == "@corp.example"])
    assert "@corp.example" in cli.run("block").stdout.splitlines()[1]  # the table: a header, then the entry
    # ... and the owner hears what was applied (no reply ends in silence)
    [note] = [
        m for m in sent_to(system, "owner@example.net", 2) if m["Subject"].startswith("About your reply")
    ]
    assert "only command lines (applied: block @corp.example)" in note.get_body(("plain",)).get_content()

    # 3. Later mail from that domain is held; the CLI lists and shows it; the digest lists it.
    system.send(
        "bob@corp.example", cfg.public_email, mail(sender="Bob <bob@corp.example>", subject="Following up")
    )
    [held] = wait_for("the held mail", lambda: cli.json("quarantine", "list"))
    assert (
        held["reason"] == "blocked by the owner (@corp.example)"
        and held["sender"] == "Bob <bob@corp.example>"
    )
    shown = cli.run("quarantine", "show", held["id"]).stdout
    assert "blocked by the owner (@corp.example)" in shown and "Following up" in shown
    assert cli.run("quarantine", "show", held["id"], "--raw").stdout.startswith(
        "From: Bob <bob@corp.example>"
    )
    assert "digest of 1 held mail" in cli.run("quarantine", "digest").stdout
    [digest] = [m for m in sent_to(system, "owner@example.net", 3) if m["Subject"].startswith("Quarantine")]
    release = next(
        line.split()[-1]
        for line in digest.get_body(("plain",)).get_content().splitlines()
        if line.strip().startswith("Release:")
    )
    assert release == shown.split("releaseAddress:")[1].split()[0]  # `quarantine show` names the same address

    # 4. The owner mails the release address: Bob's mail is forwarded.
    system.send("owner@example.net", release, mail(sender=OWNER, to=release, subject="release", text=""))
    released = wait_for(
        "the released forward",
        lambda: [m for m in sent_to(system, "owner@example.net", 4) if m["Subject"] == "Following up"],
    )
    assert "Released from quarantine" in released[0].get_body(("plain",)).get_content()
    assert (
        cli.json("quarantine", "list") == []
        and cli.json("quarantine", "list", "--all")[0]["status"] == "released"
    )

    # 5. The CLI releases a second held mail; unblock lets the domain through again.
    system.send(
        "eve@corp.example", cfg.public_email, mail(sender="Eve <eve@corp.example>", subject="Eve here")
    )
    [held] = wait_for("the second held mail", lambda: cli.json("quarantine", "list"))
    assert "released" in cli.run("quarantine", "release", held["id"]).stdout
    wait_for("Eve's forward", lambda: [m for m in system.outbox() if m["subject"] == "Eve here"])
    assert "unblocked @corp.example" in cli.run("unblock", "@corp.example").stdout
    assert cli.run("unblock", "@corp.example", ok=False).returncode == 1
    assert "refused" in cli.run("block", "owner@example.net", ok=False).stderr
    assert "allowed jane@corp.example" in cli.run("allow", "jane@corp.example").stdout

    # 6. The owner starts a conversation from the public address.
    new = f"new@{cfg.thread_domain}"
    system.send(
        "owner@example.net",
        new,
        mail(
            sender=OWNER,
            to=new,
            subject="Coffee?",
            text="[to: carol@other.example]\nHi Carol, coffee next week?\n",
        ),
    )
    [first] = sent_to(system, "carol@other.example")
    assert first["Subject"] == "Coffee?" and first["From"].addresses[0].addr_spec == cfg.public_email
    assert first.get_body(("plain",)).get_content() == "Hi Carol, coffee next week?\n"
    listed = {c["conversationId"]: c for c in cli.json("conversations")}
    assert {"jane-at-corp.example", "bob-at-corp.example", "carol-at-other.example"} <= set(listed)
    assert "carol-at-other.example" in cli.run("conversations").stdout

    # 7. Suppression: permanent bounces reported by SES: a contact is suppressed, the owner's mailbox held.
    for n, address in enumerate(("dave@corp.example", "owner@example.net")):
        bounce = {
            "notificationType": "Bounce",
            "mail": {"messageId": f"x{n}", "source": cfg.public_email, "headers": []},
            "bounce": {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [{"emailAddress": address}],
            },
        }
        client("sns").publish(
            TopicArn=resources.topic_arn(cfg, cfg.feedback_topic), Message=json.dumps(bounce)
        )
    wait_for("the suppression and the hold", lambda: len(cli.json("suppression", "list")) == 2)
    table = cli.run("suppression", "list").stdout
    assert (
        "dave@corp.example" in table
        and "suppressed" in table
        and "owner@example.net" in table
        and "held" in table
    )
    assert "no longer suppressed" in cli.run("suppression", "remove", "dave@corp.example").stdout
    assert "no longer held" in cli.run("suppression", "remove", "owner@example.net").stdout
    assert cli.json("suppression", "list") == []

    # 8. DLQ: SES refuses the sending domain, the forward ends in its DLQ; once fixed, a redrive sends it.
    client("ses").delete_identity(Identity=cfg.domain_name)
    try:
        system.send(
            "zed@zed.example", cfg.public_email, mail(sender="Zed <zed@zed.example>", subject="Lost?")
        )
        wait_for(
            "the forward in its DLQ",
            lambda: [
                q
                for q in cli.json("dlq", "list")
                if q["queue"] == resources.dlq_name(cfg.forward_queue) and q["messages"]
            ],
            timeout=120,
        )
        [dead] = cli.json("dlq", "list", "forward")
        assert (dead["kind"], dead["recipient"], dead["subject"]) == ("forward", "owner@example.net", "Lost?")
    finally:
        client("ses").verify_domain_identity(Domain=cfg.domain_name)
    moved = cli.json("dlq", "redrive", "forward")
    assert moved[resources.dlq_name(cfg.forward_queue)] == [1, cfg.forward_queue]
    wait_for(
        "the redriven forward", lambda: [m for m in system.outbox() if m["subject"] == "Lost?"], timeout=120
    )
    assert cli.json("dlq", "list", "forward") == []
