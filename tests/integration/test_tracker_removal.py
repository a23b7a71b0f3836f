"""A newsletter with a known tracker's 1x1 pixel, through inbound-handler and forward-sender under the
RIE: the mail the owner gets says "1 tracker removed", no longer names the tracker, and keeps the
content image and the links."""

from __future__ import annotations

from collections.abc import Callable

from common.local.rie import RieProcess
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
