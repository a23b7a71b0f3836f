"""The owner's own text by evidence and by shape (common/reply/text.py), the owner's names in any
order (common/reply/scrub.py), opaque-signed replies (common/reply/signed.py) and once-only header
fields (common/reply/auth.py)."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs7

from common.delivery.compose import FORWARD_MARKER
from common.reply import text as rt
from common.reply.auth import NotAuthorisedError, check_single_fields
from common.reply.scrub import hide_names, owner_names
from common.reply.signed import SignedDataError, unwrap
from common.reply.text import Evidence, clean_reply, known_lines, owner_controls, read_reply, reply_text
from tests.support.ownerkeys import smime_owner

OURS = ("hello@example.com", "@example.com", "@thread.example.com")


def own(text: str, ev: Evidence | None = None) -> str:
    return read_reply(text, ev).own


def test_bottom_posting_keeps_the_owners_answer_below_the_quote() -> None:
    text = "On 01/03/11 7:07 PM, Jane wrote:\n> Can we talk?\n> Jane\n\nYes, Tuesday.\n\n-- \nAna\n"
    assert own(text) == "Yes, Tuesday.\n\n-- \nAna\n"


def test_inline_answers_stay_in_order_and_the_quoted_lines_are_dropped() -> None:
    text = (
        "On Tue, Apr 29, 2014 at 4:22 PM, Jane <jane@corp.example> wrote:\n\n> First question?\n\n"
        "First answer.\n\n> Second question?\n\nSecond answer.\n"
    )
    assert own(text) == "First answer.\n\n\nSecond answer.\n"


def test_a_greeting_directly_above_a_quoted_attribution_is_kept() -> None:
    assert own("Hello\n> On Mon, 3 Nov 2026, Jane <jane@x.example> wrote:\n> > hi\n") == "Hello\n"


@pytest.mark.parametrize(
    "attribution",
    [
        'On Mar 8, 2012 9:59 AM, "Example.com" <\nr+7f1b@example.com> wrote:',
        "On Dec 16, 2011, at 12:47 PM, Corey Donohoe\n<reply@reply.github.com>\nwrote:",
        "Den 3. nov. 2026 kl. 10:00 skrev Jane <jane@corp.example>:",  # Norwegian Gmail
        "3 нояб. 2026 г. 10:00 пользователь Jane <jane@corp.example> написал:",  # Russian Android
        "Op 13-02-2014 3:18 schreef Julius Caesar <pantheon@rome.com>:",  # Dutch
        "On 04/19/2011 07:10 AM, Roman wrote",  # no colon, followed by a quote
    ],
)
def test_attributions_by_shape_never_take_the_owners_last_line(attribution: str) -> None:
    text = f"Thanks Thanmai, see you at 10:00\n{attribution}\n\n> quoted\n> more\n"
    assert own(text) == "Thanks Thanmai, see you at 10:00\n"


@pytest.mark.parametrize(
    "header",
    [
        "-----Oprindelig besked-----\nFra: Jane\nSendt: 3. november 2026 10:00",  # Danish
        "---- On Mon, 03 Nov 2026 10:00:00 +0000 Jane <jane@corp.example> wrote ----",  # Zoho
        "De : Jane Doe\nEnvoyé le : lundi 3 novembre 2026 10:00\nÀ : Ana\nObjet : Role",  # French Outlook
        "Från: Jane <jane@corp.example>\nSkickat: den 3 november 2026\nTill: Ana\nÄmne: Role",  # Swedish
        "Kutoka: Jane <jane@corp.example>\nKwa: Ana",  # Swahili: no rule names it
        "On Wed, 14 Nov 2018 08:14:43 -0200 John Doe <john@doe.com> wrote",  # no colon, no ">" below
    ],
)
def test_unmarked_quotes_are_cut_at_their_header_in_any_language(header: str) -> None:
    assert own(f"Sounds good.\n\n{header}\n\nHi, can we talk?\n[allow]\n") == "Sounds good.\n"


def test_a_list_of_labels_of_the_owners_own_is_no_header_block() -> None:
    text = (
        "Invitation:\n\nDate: Wednesday 3, October 2011\nTime: 7 : 00am\nAddress: 130 Fox St\n\nBring ID.\n"
    )
    assert own(text) == text


def test_the_forwards_marker_cuts_with_the_unknown_header_above_it() -> None:
    text = (
        "Sounds good.\nAna\n\nZZ: Jane via example.com <hello@example.com>\nYY: 3/11/2026\n\n"
        f"{FORWARD_MARKER}\nFrom: Jane <jane@corp.example>\n\n[allow]\n"
    )
    reading = read_reply(text)
    assert reading.own == "Sounds good.\nAna\n" and reading.proven and owner_controls(text) == []


def test_the_contacts_own_lines_are_quote_and_never_a_command() -> None:
    ev = Evidence(known_lines("Hello Ana, about the role you posted.\n[allow]\n[company: Evil]\n"), OURS)
    text = "[company: Acme]\nSure.\n\nHello Ana, about the role you posted.\n[allow]\n[company: Evil]\n"
    reading = read_reply(text, ev)
    assert reading.own == "[company: Acme]\nSure.\n"
    assert owner_controls(text, ev) == []
    assert clean_reply(text, ("owner@example.net",), "hello@example.com", ev)[1] == {"companyName": "Acme"}
    # A short line alone proves nothing (the owner may write "[allow]" too), but never as a command.
    assert read_reply("[allow]\nOk.\n", ev).commands == "Ok.\n"


def test_commands_above_an_unmarked_quote_found_by_shape_alone_are_withheld() -> None:
    text = "Fine.\n[allow]\n\nKutoka: Jane <jane@corp.example>\nKwa: Ana\n\n[block]\n"
    reading = read_reply(text)
    assert reading.own == "Fine.\n[allow]\n" and reading.commands_withheld and owner_controls(text) == []
    # The reply's leading command lines are the owner's even then: the contact's text never tops it.
    lead = "[allow]\nFine.\n\nKutoka: Jane <jane@corp.example>\nKwa: Ana\n\n[block]\n"
    assert not read_reply(lead).commands_withheld
    assert owner_controls(lead) == [rt.Control(rt.ControlAction.ALLOW, "")]
    assert not read_reply("[allow]\nFine.\n").commands_withheld  # no quote: the owner's own lines
    assert owner_controls("[allow]\nFine.\n\nOn Mon, 3 Nov 2026, Jane <j@x.example> wrote:\n> hi\n") != []


def test_html_rules_and_top_borders_separate_the_quote_in_an_html_only_reply() -> None:
    html = (
        "<div>Fine.</div><hr><div>Von: Jane</div><div>theirs [allow]</div>"
        '<div style="border-top:solid 1px">older</div>'
    )
    assert own(reply_text("", html)) == "Fine.\n"
    css = "<style>p{border-top:1px}</style><p>Fine.</p>"  # a rule in a style sheet is no rule
    assert own(reply_text("", css)) == "Fine.\n"


@pytest.mark.parametrize(
    ("make", "size"),
    [
        (lambda n: "Label: " * n, 200_000),
        (lambda n: ("a:" + " " * 30) * n, 50_000),
        (lambda n: "1:00 2026 " * n + "\n>", 100_000),
        (lambda n: ("x@y " * 50 + "\n") * n, 5_000),
        (lambda n: "-" * n + "x", 1_000_000),
        (lambda n: "On 2026 a@b:\n" * n, 50_000),
        (lambda n: "> q\nw\n" * n, 100_000),
        (lambda n: "<hr" * n + "border-top" * n, 100_000),
        (lambda n: "<p style=" + "border-top" * n, 200_000),
    ],
)
def test_reading_is_linear_on_hostile_shapes(make: object, size: int) -> None:
    assert callable(make)
    start = time.process_time()
    own(make(size // 10))
    reply_text("", make(size // 10))
    small = time.process_time() - start
    start = time.process_time()
    own(make(size))
    reply_text("", make(size))
    big = time.process_time() - start
    assert big < max(1.0, 30 * small), (small, big)


def test_the_owners_names_are_hidden_in_every_order_case_and_initial_form() -> None:
    names = owner_names(("Ana Maria Lindqvist",), "Ana Lindqvist")
    text = (
        "Lindqvist, Ana\nANA LINDQVIST; A. Lindqvist\nlindqvist  ana maria\nLindqvist A. M.\n"
        "Maria, Ana Lindqvist\nAnalindqvist stays, Lindqvists stays"
    )
    assert hide_names(text, names, "Alex") == (
        "Alex\nAlex; Alex\nAlex\nAlex\nAlex\nAnalindqvist stays, Lindqvists stays"
    )


def test_an_opaque_signature_is_unwrapped_and_verified() -> None:
    owner, other = smime_owner(), smime_owner()
    content = b"Content-Type: text/plain\r\n\r\nTuesday.\r\n"
    for options in (
        [pkcs7.PKCS7Options.Binary],
        [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoAttributes],
    ):
        der = (
            pkcs7.PKCS7SignatureBuilder()
            .set_data(content)
            .add_signer(owner.cert, owner.private_key, hashes.SHA256())
            .sign(serialization.Encoding.DER, options)
        )
        assert unwrap(der, owner.pem).verified and unwrap(der).content == content
        with pytest.raises(SignedDataError, match="does not verify"):
            unwrap(der, other.pem)
        tampered = der.replace(b"Tuesday", b"Fooday!")
        with pytest.raises(SignedDataError):
            unwrap(tampered, owner.pem)


@pytest.mark.parametrize(
    "der",
    [
        b"",
        b"\x30",
        b"\x30\x80",
        b"\x30\x84\xff\xff\xff\xff",
        b"\x30\x80" * 1000,
        b"\x1f\x01\x00",
        b"\x04\x80\x00\x00",
    ],
)
def test_a_broken_signature_structure_is_refused_with_a_reason(der: bytes) -> None:
    with pytest.raises(SignedDataError):
        unwrap(der)


@pytest.mark.parametrize("field", ["To", "From", "Message-ID", "Subject", "Date", "Reply-To", "cc"])
def test_a_field_allowed_once_may_not_come_twice(field: str) -> None:
    head = (
        "From: a@x\r\nTo: b@y\r\nSubject: s\r\nMessage-ID: <1@x>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n"
    )
    raw = f"{field}: extra\r\n{head}Reply-To: a@x\r\nCc: c@z\r\n\r\nbody".encode()
    with pytest.raises(NotAuthorisedError, match="more than one"):
        check_single_fields(raw)
    check_single_fields(f"{head}Received: a\r\nReceived: b\r\n\r\nbody".encode())


def test_the_regex_list_is_what_the_module_holds() -> None:
    """Every pattern rt applies to mail text (docs/reply.md lists them; each is linear: bounded
    repeats, no nested or overlapping quantifiers)."""
    assert {
        name for name, value in vars(rt).items() if hasattr(value, "pattern") and name.startswith("_")
    } == {
        "_QUOTED",
        "_LABEL",
        "_DATE",
        "_ADDRESS",
        "_PREFIX",
        "_COMMAND",
        "_CONTROL",
        "_TO",
        "_BRACKETED",
    }


def test_the_evidence_read_stops_at_its_budget_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the budget the rest of the conversation's mail is left unread: the reply is still read
    (and sent, the owner told: common/reply/handler.py), never a timeout."""
    from types import SimpleNamespace

    from common.reply import handler
    from tests.support.mailgen import mail

    cfg = SimpleNamespace(
        public_email="hello@example.com",
        public_emails=("hello@example.com",),
        domain_name="example.com",
        thread_domain="thread.example.com",
    )
    raws = [mail(text=f"Line {n} of an archived mail, long enough to count.\n") for n in range(3)]
    monkeypatch.setattr(handler.rawmail, "archived", lambda *args: raws)
    record = {"senderEmail": "jane@corp.example", "lastMessageBody": "Hello there, about the role.\n"}
    full = handler.evidence(cfg, "cid", record, new=False)  # type: ignore[arg-type]
    assert full.complete and "line 2 of an archived mail, long enough to count." in full.contact_lines
    assert "jane@corp.example" in full.party_addresses and "@thread.example.com" in full.party_addresses
    cut = handler.evidence(cfg, "cid", record, new=False, budget_s=-1.0)  # type: ignore[arg-type]
    assert not cut.complete and "line 0 of an archived mail, long enough to count." not in cut.contact_lines
    monkeypatch.setattr(handler, "EVIDENCE_MAX_CHARS", 10)
    assert not handler.evidence(cfg, "cid", record, new=False).complete  # type: ignore[arg-type]


def test_a_reply_quoting_the_contacts_long_mail_with_its_evidence_reads_linearly() -> None:
    """Each quoted line of the contact's re-walked its whole quote block: a 429 KB mail made every
    later reply time out. The reading builds its lookups once (bench/reply_passes.py times it too)."""

    def case(lines: int) -> tuple[str, Evidence]:
        contact = "".join(f"Line {n} of the contact's long mail, about the role.\n" for n in range(lines))
        quoted = "".join("> " + line + "\n" for line in contact.splitlines())
        reply = "Thanks.\n\nOn Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote:\n" + quoted
        return reply, Evidence(known_lines(contact), OURS, ("jane@corp.example",))

    small, big = case(2_000), case(8_000)
    start = time.process_time()
    read_reply(*small)
    t_small = time.process_time() - start
    start = time.process_time()
    reading = read_reply(*big)
    t_big = time.process_time() - start
    assert reading.own == "Thanks.\n" and reading.removed == ()
    assert t_big < max(0.5, 10 * t_small), (t_small, t_big)
