"""Tracker removal in forwards: one test per rule of common/data/trackers.json, pixels by size and
visibility, real images and cid: parts kept, hostile HTML in linear time, the banner and the switch."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from common.delivery.compose import build_forward
from common.errors import ConfigError
from common.mail import htmlsafe, trackers
from common.mail.parse import parse
from common.store.attachments import Stored
from deploy.config import load

DATA = json.loads(resources.files("common").joinpath("data/trackers.json").read_text())


@pytest.mark.parametrize("rule", DATA["open"], ids=[r["id"] for r in DATA["open"]])
def test_each_open_tracking_rule_removes_its_pixel_whatever_its_size(rule: dict[str, str]) -> None:
    page = f'<p>Hi</p><img src="{rule["example"]}" width="600" alt="logo"><p>Bye</p>'
    cleaned, removed = htmlsafe.clean(page)
    assert (cleaned, removed) == ("<p>Hi</p><p>Bye</p>", 1)


@pytest.mark.parametrize("rule", DATA["click"], ids=[r["id"] for r in DATA["click"]])
def test_each_click_redirect_rule_unwraps_to_its_target(rule: dict[str, str]) -> None:
    href = rule["example"].replace("&", "&amp;")  # as it stands in HTML
    cleaned, removed = htmlsafe.clean(f'<a class="btn" href="{href}" title="x">Apply</a>')
    target = rule["target"].replace("&", "&amp;")
    assert (cleaned, removed) == (f'<a class="btn" href="{target}" title="x">Apply</a>', 1)


@pytest.mark.parametrize(
    "tag",
    [
        '<img src="https://news.example.org/p.gif" width="1" height="1">',
        "<img src='//news.example.org/p.gif' width=1px height=0>",
        '<img src="https://news.example.org/p.gif" style="width:1px;height:1px;border:0">',
        '<img src="https://news.example.org/p.gif" style="display: none">',
        '<img src="https://news.example.org/p.gif" hidden>',
        '<IMG SRC="https://news.example.org/p.gif" WIDTH="0" HEIGHT="20"/>',
    ],
)
def test_a_tiny_or_hidden_remote_image_is_a_pixel(tag: str) -> None:
    assert htmlsafe.clean(f"a{tag}b") == ("ab", 1)


@pytest.mark.parametrize(
    "tag",
    [
        '<img src="https://news.example.org/hero.jpg" width="600" height="300" alt="the product">',
        '<img src="https://news.example.org/hero.jpg">',  # no size given: a content image
        '<img src="cid:logo@corp" width="1" height="1">',  # a part of the mail itself: nothing is fetched
        '<img src="data:image/gif;base64,R0lGOD" width="1" height="1">',
        '<a href="https://example.org/job?id=7">a plain link</a>',
        '<a href="https://www.google.com/url?q=javascript:alert(1)">not an http(s) target</a>',
    ],
)
def test_content_images_and_plain_links_are_kept(tag: str) -> None:
    assert htmlsafe.clean(tag) == (tag, 0)


RAW = (
    b"From: Shop <news@shop.example>\r\nTo: hello@example.com\r\nSubject: Offer\r\n"
    b"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>Sale</p>"
    b'<img src="https://shop.us1.list-manage.com/track/open.php?u=1&amp;id=2" width="1" height="1">'
    b'<img src="https://shop.example/hero.jpg" width="600"></body></html>\r\n'
)


@pytest.mark.parametrize(("switch", "banner"), [("on", True), ("off", False)])
def test_the_forward_says_how_many_trackers_went_and_the_switch_turns_it_off(
    switch: str, banner: bool
) -> None:
    cfg = load(
        {
            "DOMAIN_NAME": "example.com",
            "PUBLIC_EMAIL": "hello@example.com",
            "PRIVATE_EMAIL": "owner@example.net",
            "REMOVE_TRACKERS": switch,
        }
    )
    fwd = build_forward(
        cfg,
        "m1",
        "news-at-shop.example",
        parse(RAW),
        Stored(),
        (),
        "conversations/c/m1.eml",
        "r@thread.example.com",
    )
    assert ("1 tracker removed" in fwd.html and "1 tracker removed" in fwd.text) is banner
    assert ("list-manage.com" in fwd.html) is not banner
    assert "https://shop.example/hero.jpg" in fwd.html
    with pytest.raises(ConfigError, match="REMOVE_TRACKERS"):
        load({"REMOVE_TRACKERS": "maybe"})


def test_the_banner_counts_as_relay_does() -> None:
    assert [trackers.banner(n) for n in (1, 2)] == ["1 tracker removed", "2 trackers removed"]


def test_past_the_cap_nothing_is_left_unread_silently() -> None:
    """20,001 images no longer stop the scan: every image is examined up to the character cap, and
    what lies past the cap is left out of the forward and named in the banner."""
    pixel = '<img src="https://shop.us1.list-manage.com/track/open.php?u=1">'
    photo = '<img src="https://shop.example/p.jpg" width="600">'
    page = photo * 20_001 + pixel
    result = htmlsafe.sanitize(page)
    assert result.removed == 1 and "list-manage" not in result.html and result.left_unread == 0
    cut = htmlsafe.sanitize(photo * 10 + pixel, limit=len(photo) * 10 + 5)
    assert "list-manage" not in cut.html and cut.left_unread == len(pixel) - 5
    assert "left out of this forward" in htmlsafe.cut_note(cut)


# --- read as a browser reads them: whole CSS tokens, every length unit, small images --------------

TRACKER = "https://news.us7.list-manage.com/track/open.php?u=1"
UNKNOWN = "https://img.unknown-sender.example/p.gif"


@pytest.mark.parametrize(
    "size",
    [
        "0.1em",
        "1pt",
        "0.1rem",
        "0.1vw",
        "0.5mm",
        "0.02in",
        "0.1%",
        "0.05cm",
        "1q",
        "0.1pc",
        "0.2ch",
        "0.2ex",
        "0.1lh",
        "0.1vmin",
        "0.1cqw",
        "0.1dvh",
        "1.5px",
        "1.9PX",
        "0",
        "1\\70 t",
    ],
)
def test_an_image_rendering_under_two_pixels_in_any_unit_is_a_pixel(size: str) -> None:
    tag = f'<img src="{UNKNOWN}" style="width:{size};height:{size}">'
    assert htmlsafe.clean(f"a{tag}b") == ("ab", 1)


@pytest.mark.parametrize("attrs", ['width="2" height="2"', "width=2", 'height="1"', 'width="0.1%" height=1'])
def test_a_two_by_two_image_from_an_unknown_host_is_counted(attrs: str) -> None:
    assert htmlsafe.clean(f'a<img src="{UNKNOWN}" {attrs}>b') == ("ab", 1)


@pytest.mark.parametrize(
    "tag",
    [
        f'<img src="{UNKNOWN}" width="3" height="3">',
        f'<img src="{UNKNOWN}" width="600" height="1">',  # a divider line, seen
        f'<img src="{UNKNOWN}" style="width:1em;height:1em">',  # 16 px: an icon
        f'<img src="{UNKNOWN}" style="width:10vw">',
    ],
)
def test_small_but_visible_images_are_kept(tag: str) -> None:
    assert htmlsafe.clean(tag)[1] == 0


@pytest.mark.parametrize(
    "html",
    [
        f"<div style=\"background:url('{TRACKER};{{x')\">x</div>",
        f'<div style="a:b;background:url(&quot;{TRACKER}}}{{;&quot;)">x</div>',
        f"<style>.x{{background:url('{TRACKER};{{}}')}}</style><p class=x>x</p>",
        f"<style>.x{{a:'}};{{' ; background:url({TRACKER});}}</style><p class=x>x</p>",
        f"<style>/* ; {{ */ .x{{background-image:image-set('{TRACKER}' 1x)}}</style>",
        f"<style>@import url('{TRACKER};{{');</style>",
        f"<style>p{{ .y {{ background:url({TRACKER}) }} }}</style>",  # dropped as a nested rule: counted
        # A quote before the cut used to swallow the url() after it: the tracker stayed, uncounted.
        f"<div style='cursor:url(\"a;b\"), url({TRACKER}), auto'>x</div>",
        f"<div style='content:\"{{\" url({TRACKER})'>x</div>",
        f"<style>.x{{cursor:url('a;b'), url({TRACKER}), auto}}</style><p class=x>x</p>",
        f"<style>.x{{content:'{{' url({TRACKER})}}</style><p class=x>x</p>",
    ],
)
def test_a_url_with_semicolons_or_braces_is_read_whole(html: str) -> None:
    from tests.support import judge

    result = htmlsafe.sanitize(html, scope="s")
    assert result.removed == 1, result
    assert not [u for u in judge.loads(judge.fragment(result.html)) if trackers.is_tracker_url(u)]


MIXED = (
    f'<p style="background:url({TRACKER})">a</p>'
    f"<style>.a{{background:url('{TRACKER}&x;{{')}} .b{{color:red}} @import '{TRACKER}';</style>"
    f'<img src="{TRACKER}" width="600"><img srcset="{TRACKER} 1x, cid:a 2x" src="cid:b">'
    f'<img src="{UNKNOWN}" style="width:0.05em;height:1pt"><img src="{UNKNOWN}" width=2 height=2>'
    '<img src="https://photos.example/hero.jpg" width="600">'
    f'<table background="{TRACKER}"><tr><td>t</td></tr></table>'
)


def test_the_banner_counts_exactly_what_html5lib_sees_removed() -> None:
    """The count is the tracker URLs and pixel images a browser would have loaded from the input and
    does not from the output, both read by html5lib and tinycss2."""
    from common.delivery.compose import _safe_html
    from tests.support import judge

    def tracking(html: str) -> int:
        urls = judge.loads(judge.fragment(html))
        return sum(trackers.is_tracker_url(u) for u in urls) + sum(u == UNKNOWN for u in urls)

    result = htmlsafe.sanitize(MIXED, scope="s")
    assert tracking(result.html) == 0 and "photos.example/hero.jpg" in result.html
    assert result.removed == tracking(MIXED) == 8

    class Cfg:
        remove_trackers = "on"

    _, warnings = _safe_html(Cfg(), MIXED, ())  # type: ignore[arg-type]
    assert warnings == (trackers.banner(8),) and "8 trackers removed" in warnings[0]
