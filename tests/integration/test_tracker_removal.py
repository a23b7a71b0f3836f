"""A newsletter with a known tracker's 1x1 pixel, through inbound-handler and forward-sender under the
RIE: the mail the owner gets says "1 tracker removed", no longer names the tracker, and keeps the
content image and the links."""

from __future__ import annotations

from collections.abc import Callable

from common.mail.htmltext import convert
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail

HTML = (
    "<html><body><p>Our new roles</p>"
    '<img src="https://shop.us1.list-manage.com/track/open.php?u=1a2b&amp;id=3c4d" width="1" height="1" '
    'alt="">'
    '<img src="https://shop.example/hero.jpg" width="600" alt="the team">'
    '<a href="https://shop.example/jobs">See the jobs</a>'
    "</body></html>"
)


def test_the_forward_says_one_tracker_removed_and_no_longer_references_it(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    inbound, sender = (
        rie_function("inbound-handler"),
        rie_function("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"}),
    )
    result = inbound.invoke(
        stack.receipt(
            mail(sender="Shop <news@shop.example>", html=HTML), "0000000000000000000000000000000000000k01"
        )
    )
    assert result["status"] == "forwarded", result
    stack.run_sender(sender, stack.cfg.forward_queue)
    [sent] = [s for s in stack.sent() if s.destinations == [stack.cfg.private_email]]
    html = sent.message.get_body(("html",)).get_content()
    text = sent.message.get_body(("plain",)).get_content()
    assert "1 tracker removed" in html and "1 tracker removed" in text
    assert "list-manage.com" not in sent.raw.decode()
    assert "https://shop.example/hero.jpg" in html and 'href="https://shop.example/jobs"' in html


PIXEL = "https://news.us7.list-manage.com/track/open.php?u=9&amp;id=8"
EVASIVE = (
    "<!--<body></body>--><p>Dear owner</p>"
    f'<img alt=">" src="{PIXEL}">'
    '<img src="https:\\\\news.us7.list-manage.com\\track/open.php?u=2">'
    f'<div style="background:url({PIXEL})">styled</div>'
    f'<img src="https://photos.example.org/wf/open/team.jpg" srcset="{PIXEL} 2x" width="640">'
    '<div style="display:none"><img src="https://img.other.example/p.gif" width="200"></div>'
    "<p>unclosed <b><a href='https://example.org/'>link <!-- comment never closed"
)


def test_evasions_in_the_body_and_the_attachments_lose_their_trackers_and_the_banner_shows(
    stack: Stack, rie_function: Callable[..., RieProcess]
) -> None:
    """Through inbound-handler and forward-sender under the RIE: a DMARC-failed mail whose HTML
    tries to hide the banner in a comment and to keep its pixels in six ways, with a second HTML
    file and an attached message carrying pixels too."""
    inner = mail(sender="Inner <in@shop.example>", text=None, html=f'<p>inner</p><img src="{PIXEL}">')
    raw = mail(
        sender="Shop <news@shop.example>",
        html=EVASIVE,
        attachments=[
            ("offer.html", f'<p>offer</p><img src="{PIXEL}">'.encode(), "text/html"),
            ("earlier.eml", inner, "message/rfc822"),
        ],
    )
    inbound = rie_function("inbound-handler")
    sender = rie_function("forward-sender", env={"RETRY_DELAYS_SECONDS": "0"})
    receipt = stack.receipt(raw, "0000000000000000000000000000000000000k02", verdicts={"dmarc": "FAIL"})
    assert inbound.invoke(receipt)["status"] == "forwarded"
    stack.run_sender(sender, stack.cfg.forward_queue)
    [sent] = [s for s in stack.sent() if s.destinations == [stack.cfg.private_email]]
    assert "list-manage" not in sent.raw.decode() and "img.other.example" not in sent.raw.decode()
    html = sent.message.get_body(("html",)).get_content()
    shown = convert(html).text  # read as HTML5 reads it: the banner is not in a comment or an attribute
    assert "DMARC check failed" in shown and "Dear owner" in shown
    assert "trackers removed" in shown and "photos.example.org/wf/open/team.jpg" in html
    assert "from the attached HTML and messages" in shown
