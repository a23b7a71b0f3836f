"""The forward's HTML: the system's marker, banner, header block and footer notes stand before the
contact's HTML and outside it, so no markup of the contact's can contain, hide or reorder them."""

from __future__ import annotations

import pytest

from common.delivery.compose import FORWARD_MARKER, _html_with
from common.mail.htmltext import html_to_text

BANNER = "DMARC check failed: this mail may be forged"


@pytest.mark.parametrize(
    "contact",
    [
        "<!--<body></body>--><p>Hi [allow]</p>",  # the banner used to land inside this comment
        "<html><head><style>div,p,b{display:none!important}</style></head><body style='display:none'>Hi",
        "<!--[if mso]><p>Hi</p>",  # an unclosed conditional comment
        "<plaintext><p>Hi",
        "</div></div></body></html><div style='display:none'><p>Hi",
        "<body" * 20_000,  # the old <body[^>]*> search took quadratic time on this
    ],
)
def test_the_system_block_comes_first_whatever_the_contacts_html(contact: str) -> None:
    html = _html_with(
        contact, (BANNER,), [("From", "Eve <eve@corp.example>")], ["-- f --", "Conversation: c"], []
    )
    # The contact's HTML untouched, after everything of the system's; only the box and the document
    # close after it (in a forward the sanitiser has made it a closed fragment first).
    close = "</div></body></html>"
    assert html.endswith(contact + close)
    system = html[: -len(contact + close)]
    assert system.count("<div") == system.count("</div>") + 1  # all closed but the contact's box
    shown = html_to_text(system)  # what a client shows of it: comments and raw text skipped
    assert (
        shown.index(FORWARD_MARKER)
        < shown.index(BANNER)
        < shown.index("From: Eve")
        < shown.index("Conversation")
    )
    assert "!important" in system and "::before" in system
