"""Pure logic of the owner's side: list entries, release addresses, control lines, scheduled events."""

from __future__ import annotations

import pytest

from common.errors import EventError
from common.mail.threads import release_address, thread_address, verify_release_address, verify_thread_address
from common.reply.text import Control, ControlAction, clean_reply, new_conversation_recipient, owner_controls
from common.runtime import events
from common.store import senderlists
from common.store.quarantine import quarantine_id
from deploy import config

CFG = config.load(
    {
        "DOMAIN_NAME": "example.com",
        "PUBLIC_EMAIL": "hello@example.com",
        "PRIVATE_EMAIL": "me@mail.example",
        "OWNER_EMAILS": "me@mail.example,me@work.example",
        "THREAD_SECRET": "0123456789abcdef0123",
    }
)


@pytest.mark.parametrize(
    ("value", "entry"),
    [
        ("Jane@Corp.Example", "jane@corp.example"),
        ("<jane@corp.example>", "jane@corp.example"),
        ("@Corp.example", "@corp.example"),
        ("corp.example", "@corp.example"),
        ("sub.corp.example.", "@sub.corp.example"),
    ],
)
def test_entries_normalise(value: str, entry: str) -> None:
    assert senderlists.normalise(value) == entry


@pytest.mark.parametrize("value", ["", "jane", "@", "a b@corp.example", "jane@", "@-x.example", "x@y"])
def test_bad_entries_are_refused(value: str) -> None:
    with pytest.raises(ValueError):
        senderlists.normalise(value)


def test_candidates_most_specific_first_and_coverage() -> None:
    assert senderlists.candidates("A@mail.Corp.example") == [
        "a@mail.corp.example",
        "@mail.corp.example",
        "@corp.example",
    ]
    assert senderlists.covers("@corp.example", "x@mail.corp.example") and not senderlists.covers(
        "@corp.example", "x@notcorp.example"
    )


@pytest.mark.parametrize(
    ("entry", "protected"),
    [
        ("me@mail.example", True),
        ("@mail.example", True),
        ("@work.example", True),
        ("@example", True),
        ("@example.com", True),
        ("@thread.example.com", True),
        ("hello@example.com", True),
        ("@corp.example", False),
        ("someone@mail2.example", False),
    ],
)
def test_the_owners_own_mail_cannot_be_listed(entry: str, protected: bool) -> None:
    assert bool(senderlists.protected(CFG, entry)) is protected


def test_release_addresses_are_separate_from_thread_addresses() -> None:
    qid = quarantine_id("o3vrnil0e2ic28trm7dfhrc2v0cnbeccl4nbp0g1")
    address = release_address(qid, CFG.thread_secret, CFG.thread_domain)
    assert len(qid) == 16 and qid.isalnum() and len(address.split("@")[0]) == 8 + 16 + 1 + 16
    assert verify_release_address(address, CFG.thread_secret, CFG.thread_domain) == qid
    assert verify_release_address(address, "other-secret-0123456", CFG.thread_domain) is None
    # Neither kind of address verifies as the other.
    assert verify_thread_address(address, CFG.thread_secret, CFG.thread_domain) is None
    look_alike = thread_address(f"release.{qid}", CFG.thread_secret, CFG.thread_domain)
    assert verify_release_address(look_alike, CFG.thread_secret, CFG.thread_domain) is None


def test_control_lines_come_from_the_owners_text_only_and_never_go_out() -> None:
    text = (
        "Thanks, but no.\n[block]\n [Block: Domain] \n[allow: @x.example]\n[unblock:jane@corp.example]\n"
        "[sic] stays\n\nOn Mon, 3 Nov 2026 at 10:00, Jane <j@x> wrote:\n> [unblock]\n"
        "> -- forwarded by service-email-handler --\n"
    )
    assert owner_controls(text) == [
        Control(ControlAction("block"), ""),
        Control(ControlAction("block"), "Domain"),
        Control(ControlAction("allow"), "@x.example"),
        Control(ControlAction("unblock"), "jane@corp.example"),
    ]
    body, _ = clean_reply(text, ("me@mail.example",), "hello@example.com")
    assert body == "Thanks, but no.\n[sic] stays\n"


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("[to: bob@other.example]\nHi", "bob@other.example"),
        ("\n\n  [ TO : <bob@other.example> ]\nHi", "bob@other.example"),
        ("Hi\n[to: bob@other.example]", ""),
        ("[cc: bob@other.example]\nHi", ""),
    ],
)
def test_new_conversation_recipient_is_the_first_line(text: str, address: str) -> None:
    assert new_conversation_recipient(text) == address


def test_scheduled_events_are_the_digest_and_release_needs_an_id() -> None:
    rule = {
        "version": "0",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "time": "2026-11-24T07:00:00Z",
        "detail": {},
    }
    assert (
        events.kind(rule) == "eventbridge" and events.OwnerTask.from_event(rule).task == "quarantine-digest"
    )
    release = {
        "detail-type": "Quarantine Release",
        "detail": {"task": "quarantine-release", "id": "ABC123", "by": "al"},
    }
    task = events.OwnerTask.from_event(release)
    assert (task.task, task.quarantine_id, task.by) == ("quarantine-release", "abc123", "al")
    for bad in (
        {"detail-type": "Other", "detail": {}},
        {"detail-type": "Scheduled Event"},
        {"detail-type": "Quarantine Release", "detail": {"task": "quarantine-release", "id": "../x"}},
    ):
        with pytest.raises(EventError):
            events.OwnerTask.from_event(bad)


def test_every_control_verb_has_its_handler() -> None:
    """A verb added to ControlAction without a handler in CONTROLS fails here (and, were it shipped,
    would be refused and reported to the owner, never written to a list: the test below)."""
    from common.reply import owner

    assert set(owner.CONTROLS) == set(ControlAction), set(ControlAction) ^ set(owner.CONTROLS)


def test_a_verb_without_a_handler_is_refused_and_reported_not_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from common.reply import owner

    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(senderlists, "put", lambda cfg, entry, name, source: calls.append(("put", name)))

    def remove(cfg: object, entry: str) -> str:
        calls.append(("remove", entry))
        return entry

    monkeypatch.setattr(senderlists, "remove", remove)
    controls = [Control(ControlAction.BLOCK, ""), Control(ControlAction.UNBLOCK, "@corp.example")]

    done = owner.apply_controls(CFG, controls, "Jane@Corp.Example", "jane-at-corp.example")
    assert done == ["block jane@corp.example", "unblock @corp.example"]
    assert calls == [("put", "block"), ("remove", "@corp.example")]

    calls.clear()
    monkeypatch.delitem(owner.CONTROLS, ControlAction.BLOCK)
    done = owner.apply_controls(CFG, controls, "Jane@Corp.Example", "jane-at-corp.example")
    assert done == ["block refused: [block] has no handler", "unblock @corp.example"]
    assert calls == [("remove", "@corp.example")]
