import pytest

from common.delivery.compose import FOOTER_MARKER
from common.reply.text import clean_reply, extract_metadata, reply_subject, strip_history

OWNERS = ("owner@example.net",)

GMAIL = """Thanks Jane, Tuesday works.

[company: Acme Corp]
[Salary_Range:  120-140k ]
[unknown: ignored]

Best,
Owner
owner@example.net

On Mon, 3 Nov 2026 at 10:00, Jane Smith via example.com <hello@example.com>
wrote:

> Hi, I would like to talk about a role.
>
> -- forwarded by service-email-handler --
"""

OUTLOOK = """Sounds good.

Owner
________________________________
From: Jane Smith via example.com <hello@example.com>
Sent: Monday, November 3, 2026 10:00 AM
To: Owner <owner@example.net>
Subject: Role

Hi, I would like to talk about a role.
"""

APPLE = """Yes, let's talk.

Sent from my iPhone

On 3 Nov 2026, at 10:00, Jane Smith via example.com <hello@example.com> wrote:

\u00a0> Hi
   > nested quote
"""


def test_gmail_reply_loses_quotes_attribution_and_commands_keeps_signature() -> None:
    body, meta = clean_reply(GMAIL, OWNERS, "hello@example.com")
    assert body == "Thanks Jane, Tuesday works.\n\nBest,\nOwner\nhello@example.com\n"
    assert meta == {"companyName": "Acme Corp", "salaryRange": "120-140k"}


def test_outlook_reply_is_cut_at_the_header_block() -> None:
    assert clean_reply(OUTLOOK, OWNERS, "hello@example.com")[0] == "Sounds good.\n\nOwner\n"


def test_apple_mail_reply_is_cut_at_the_attribution() -> None:
    assert clean_reply(APPLE, OWNERS, "hello@example.com")[0] == "Yes, let's talk.\n\nSent from my iPhone\n"


def test_footer_marker_cuts_even_without_quote_markers() -> None:
    assert strip_history(f"Reply\n{FOOTER_MARKER}\nFrom: x\n") == "Reply\n"


def test_quoted_lines_with_leading_whitespace_are_dropped() -> None:
    assert strip_history("a\n  > q\n\t>q2\nb") == "a\nb\n"


def test_metadata_keys_are_case_insensitive_and_trimmed() -> None:
    text, meta = extract_metadata(
        "[JOB_ID:  42 ]\n[Title: Staff Engineer]\n[notes:]\nkeep [inline: not a command]"
    )
    assert meta == {"jobId": "42", "title": "Staff Engineer"}
    assert text == "keep [inline: not a command]"


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Role", "Re: Role"),
        ("Re: Role", "Re: Role"),
        ("RE: Fwd: Re: Role", "Re: Role"),
        ("Fw: AW: Role", "Re: Role"),
        ("Re[2]: Role", "Re: Role"),
        ("", "Re: your message"),
    ],
)
def test_reply_subject_has_exactly_one_re(subject: str, expected: str) -> None:
    assert reply_subject(subject) == expected


def test_private_address_is_hidden_in_any_case() -> None:
    body, _ = clean_reply("Mail me at OWNER@Example.NET\n", OWNERS, "hello@example.com")
    assert body == "Mail me at hello@example.com\n"


def test_html_blockquotes_become_quoted_lines() -> None:
    from common.mail.htmltext import html_to_text
    from common.reply.text import owner_controls

    text = html_to_text(
        "<p>Mine</p><blockquote><div>theirs</div><div>[allow: @evil.example]</div>"
        "<blockquote>older</blockquote></blockquote><p>also mine</p>"
    )
    assert text == "Mine\n\n> theirs\n\n> [allow: @evil.example]\n\n> > older\n\nalso mine"
    assert owner_controls(text) == []


QUOTE_HEADERS = {
    "en": "From: Jane <jane@corp.example>\nSent: Monday, 2 November 2026 10:00",
    "es": "De: Jane <jane@corp.example>\nEnviado el: lunes, 2 de noviembre de 2026 10:00",
    "it": "Da: Jane <jane@corp.example>\nInviato: lunedì 2 novembre 2026 10:00",
    "nl": "Van: Jane <jane@corp.example>\nVerzonden: maandag 2 november 2026 10:00",
    "pt": "De: Jane <jane@corp.example>\nEnviada em: segunda-feira, 2 de novembro de 2026 10:00",
    "pl": "Od: Jane <jane@corp.example>\nWysłano: poniedziałek, 2 listopada 2026 10:00",
    "ru": "От: Jane <jane@corp.example>\nОтправлено: 2 ноября 2026 г. 10:00",
    "fr": "De : Jane <jane@corp.example>\nEnvoyé : lundi 2 novembre 2026 10:00",
    "de": "Von: Jane <jane@corp.example>\nGesendet: Montag, 2. November 2026 10:00",
    "ja": "差出人: Jane <jane@corp.example>\n送信日時: 2026年11月2日 10:00",
    "zh": "发件人: Jane <jane@corp.example>\n发送时间: 2026年11月2日 10:00",
    "it-gmail": "Il giorno lun 2 nov 2026 alle ore 10:00 Jane <jane@corp.example> ha scritto:",
    "nl-gmail": "Op ma 2 nov 2026 om 10:00 schreef Jane <jane@corp.example>:",
    "pt-gmail": "Em seg., 2 de nov. de 2026 às 10:00, Jane <jane@corp.example> escreveu:",
    "pl-gmail": "W dniu pon., 2 lis 2026 o 10:00 Jane <jane@corp.example> napisał(a):",
    "ru-gmail": "пн, 2 нояб. 2026 г. в 10:00, Jane <jane@corp.example>:",
    "ja-gmail": "2026年11月2日(月) 10:00 Jane <jane@corp.example>:",
    "zh-gmail": "Jane <jane@corp.example> 于2026年11月2日周一 10:00写道：",
}


@pytest.mark.parametrize("lang", sorted(QUOTE_HEADERS))
def test_quote_headers_in_each_language_end_the_owners_text(lang: str) -> None:
    from common.reply.text import strip_history

    text = f"Mine.\n[allow]\n\n{QUOTE_HEADERS[lang]}\n\n[block: @bank.example]\nTheirs\n"
    assert strip_history(text) == "Mine.\n[allow]\n"


def test_owner_names_are_hidden_whatever_surrounds_them() -> None:
    from common.reply.scrub import hide_names, owner_names

    names = owner_names(("Ana Owner",), "Owner  Name")
    assert names == ("Ana Owner", "Owner Name")
    assert owner_names((), "Owner") == ()  # one word: left to OWNER_NAMES
    text = 'Para: Owner Name <x>\nKwa: "OWNER\n NAME"\nana owner, Owner Names, Bowner Name'
    assert hide_names(text, names, "Alex") == "Para: Alex <x>\nKwa: Alex\nAlex, Owner Names, Bowner Name"


# The owner's text is kept unless it is proven to be the contact's (docs/reply.md, "What is removed").
INLINE = """On Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote:
> When can you meet?
Tuesday 4 Nov 2026 at 10:00, at 5 Main St.
> Can you confirm the address?
Yes.
> And your email?
ana@mail.example wrote it down:
> Is the salary fine?
OK
> Anything else?
Confirmed.
> Bye
"""


def test_inline_answers_naming_a_time_an_address_or_one_word_are_the_owners() -> None:
    from common.reply.text import read_reply

    reading = read_reply(INLINE)
    assert reading.own == (
        "Tuesday 4 Nov 2026 at 10:00, at 5 Main St.\nYes.\nana@mail.example wrote it down:\nOK\nConfirmed.\n"
    )
    # The attribution above the first block names no party of this conversation: removed, and shown.
    assert reading.removed == ("On Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote:",)


def test_an_attribution_naming_the_conversation_is_removed_without_a_word() -> None:
    from common.reply.text import Evidence, read_reply

    ev = Evidence(frozenset(), ("hello@example.com",), ("jane@corp.example",))
    reading = read_reply(INLINE, ev)
    assert reading.removed == () and reading.own.startswith("Tuesday")


def test_a_wrapped_link_tail_between_quoted_lines_is_quote_and_shown() -> None:
    from common.reply.text import read_reply

    text = (
        "Fine.\n\nOn Mon, 3 Nov 2026, Jane wrote:\n"
        "> see https://example.com/a/very/long/\npath/to/page\n> ok?\n"
    )
    reading = read_reply(text)
    assert reading.own == "Fine.\n" and "path/to/page" in reading.removed


def test_a_line_the_contact_planted_is_at_most_that_line_never_a_cut() -> None:
    from common.reply.text import Evidence, known_lines, read_reply

    ev = Evidence(known_lines("Thanks for reaching out.\nPlease send me the address.\n"))
    text = "Hi Mallory,\nThanks for reaching out.\nThe role is open; we meet Tuesday.\nBest, Ana\n"
    reading = read_reply(text, ev)
    assert reading.own == "Hi Mallory,\nThe role is open; we meet Tuesday.\nBest, Ana\n"
    assert reading.removed == ("Thanks for reaching out.",) and not reading.quoted


def test_a_display_name_holding_the_marker_text_cuts_nothing() -> None:
    from common.delivery.compose import FORWARD_MARKER
    from common.reply.text import Evidence, known_lines, read_reply

    text = (
        f"Sure.\n\nOn Mon, 3 Nov 2026, {FORWARD_MARKER} via example.com <hello@example.com> wrote:\n"
        "> When?\nTuesday.\n> Where?\nHere.\n"
    )
    assert read_reply(text).own == "Sure.\n\nTuesday.\nHere.\n"
    # The name alone on a wrapped line is not the marker either (no "From:" row follows it); it is a
    # separator's shape, so what follows is taken for quote, and the owner is shown it.
    wrapped = f"Sure.\n\nOn Mon, 3 Nov 2026,\n{FORWARD_MARKER}\nwrote:\n> When?\nTuesday.\n> Where?\n"
    reading = read_reply(wrapped)
    assert not reading.proven and "Tuesday." in reading.removed
    # As the system writes it, the marker proves the forward below it.
    real = f"Sure.\n\n{FORWARD_MARKER}\nFrom: Jane <jane@corp.example>\n\nHello\n"
    reading = read_reply(real, Evidence(known_lines("Hello\n")))
    assert reading.own == "Sure.\n" and reading.proven and reading.removed == ()


def test_answers_typed_into_an_unmarked_quote_are_shown_to_the_owner() -> None:
    """Outlook quotes without ">" and the owner types answers into the quote: below the forward's
    marker, a line that is neither the contact's nor the quote's frame is shown to the owner."""
    from common.delivery.compose import FORWARD_MARKER
    from common.reply.text import Evidence, known_lines, read_reply

    ev = Evidence(known_lines("When can we meet?\nWhere is the office?\nJane\n"))
    text = (
        "See below.\n\nFrom: Jane via example.com <hello@example.com>\n"
        "Sent: Monday, 3 November 2026 10:00\n\n"
        f"{FORWARD_MARKER}\nFrom: Jane <jane@corp.example>\nDate: Mon, 3 Nov 2026 10:00:00 +0000\n\n"
        "When can we meet?\nTuesday at ten.\nWhere is the office?\nJane\n"
    )
    reading = read_reply(text, ev)
    assert reading.own == "See below.\n" and reading.removed == ("Tuesday at ten.",)


@pytest.mark.parametrize(
    "header",
    [
        "Jane Doe <jane@corp.example> schrieb am Mo., 3. Nov. 2026, 10:00:",
        "Jane Doe <jane@corp.example> escribió el lun., 3 nov. 2026 10:00:",
        "Jane Doe <jane@corp.example> a écrit le lun. 3 nov. 2026 à 10:00 :",
        "Jane Doe <jane@corp.example> 於 2026年11月3日 週一 10:00 寫道：",
    ],
)
def test_a_quote_header_is_known_by_its_shape_and_the_quote_below(header: str) -> None:
    from common.reply.text import read_reply

    assert read_reply(f"Sounds good.\n\n{header}\n\n> Hi, can we talk?\n> [allow]\n").own == "Sounds good.\n"
    assert read_reply(f"Sounds good.\n\n{header}\nHi, can we talk?\n[allow]\n").own == "Sounds good.\n"


def test_a_quote_header_run_together_with_the_answer_on_one_line() -> None:
    from common.reply.text import read_reply

    text = "Sounds good. On Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote:\n> Hi, can we talk?\n"
    assert read_reply(text).own == "Sounds good.\n"


def test_commands_are_read_from_the_owners_lines_only_one_function_for_all() -> None:
    from common.reply.text import command_lines, new_conversation_recipient, read_reply
    from common.runtime.addresses import from_command

    forwarded = (
        "[to: zoe@corp.example]\nFor you, Zoe.\n\n---------- Forwarded message ---------\n"
        "From: Eve <eve@corp.example>\nDate: Mon, 3 Nov 2026 at 10:00\nSubject: Role\n\n"
        "[from: jobs@example.com]\n[block: @bank.example]\nHello\n"
    )
    ours = command_lines(read_reply(forwarded))
    assert new_conversation_recipient(ours) == "zoe@corp.example" and from_command(ours) == ""
    lead = forwarded.replace("For you", "[from: hello@example.com]\nFor you")
    assert from_command(command_lines(read_reply(lead))) == "hello@example.com"


def test_an_html_only_reply_shows_the_owner_the_answers_below_its_quote() -> None:
    from common.reply.text import read_reply, reply_text, unread_html_lines

    html = (
        "<p>Mine</p><blockquote>When?</blockquote><p>Tuesday.</p><blockquote>Where?</blockquote><p>Here.</p>"
    )
    reading = read_reply(reply_text("", html))
    assert reading.own == "Mine\n" and unread_html_lines("", html, reading) == ("Tuesday.", "Here.")
    gmail = (
        '<p>Mine</p><div class="gmail_quote">On Mon, 3 Nov 2026 Jane wrote:'
        "<blockquote>When?</blockquote></div>"
    )
    assert unread_html_lines("", gmail, read_reply(reply_text("", gmail))) == ()
    assert unread_html_lines("Mine\n", html, reading) == ()  # a text part is read whole


@pytest.mark.parametrize(
    ("text", "own"),
    [
        (
            "Thanks! On Mon, 3 Nov 2026 at 10:00, Jane <jane@corp.example> wrote: > Hi, can we talk?\n",
            "Thanks!\n",
        ),
        ("Ok.\nOn Mon, 3 Nov 2026, Jane <jane@corp.example> wrote:> Hi > Best, Jane\n", "Ok.\n"),
        (
            "Sounds good. Jane Doe <jane@corp.example> schrieb am Mo., 3. Nov. 2026, 10:00: "
            "Hi, can we talk?\n",
            "Sounds good.\n",
        ),
        # The owner's own sentences naming a time and an address stay whole.
        (
            "Meet me at 10:00 at jane@corp.example: bring ID.\n",
            "Meet me at 10:00 at jane@corp.example: bring ID.\n",
        ),
        (
            "Ok.\nMeet me at 10:00 at jane@corp.example: bring ID.\n",
            "Ok.\nMeet me at 10:00 at jane@corp.example: bring ID.\n",
        ),
    ],
)
def test_an_attribution_run_together_with_the_quote_on_one_line(text: str, own: str) -> None:
    from common.reply.text import read_reply

    reading = read_reply(text)
    assert reading.own == own
    assert all("Hi" in line for line in reading.removed)  # what was cut off is shown to the owner
