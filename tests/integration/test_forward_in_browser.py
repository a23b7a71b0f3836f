"""The forward's system block (marker, banner, header block, footer notes) as a real browser shows it,
whatever CSS the contact's mail carries: headless Chromium lays out the forward built by the path
delivery uses (the contact's HTML sanitised and scoped, then framed), and each hostile mail's system
block must be where, how large and how styled it is beside a harmless mail's, visible and on top.

Chromium comes from Debian's packages (scripts/host-deps.sh); without it these tests skip, except
under CI=true where they fail (tests/conftest.py, require_chromium).
"""

from __future__ import annotations

from typing import Any

import pytest

from common.delivery.compose import CONTACT_SCOPE, _html_with
from common.mail.htmlsafe import sanitize
from tests.conftest import require_chromium
from tests.support.browser import render

BANNER = "DMARC check failed: this mail may be forged"
HIDE_ALL = (
    "display:none;visibility:hidden;opacity:0;transform:scale(0);scale:0.01;translate:-9999px -9999px;"
    "rotate:90deg;zoom:0.01;filter:opacity(0);clip-path:inset(50%);mask:linear-gradient(transparent,"
    "transparent);-webkit-mask-image:linear-gradient(transparent,transparent);"
    "-webkit-text-fill-color:transparent;color:#fff;font-size:0;line-height:0;position:fixed;"
    "inset:-9999px;z-index:-1;content-visibility:hidden;height:0;overflow:hidden;text-shadow:0 0 9px #000;"
    "mix-blend-mode:difference;letter-spacing:-99px"
)
HIDE_IMPORTANT = ";".join(f"{d}!important" for d in HIDE_ALL.split(";"))

# Each: the contact's HTML. Every hiding, moving, shrinking and painting property, by every route a
# stylesheet has to the system's block.
HOSTILE = {
    "nesting with &": (
        "<style>p { color: red; body:has(&) #ehs-system, :root:has(&) #ehs-system * { HIDE }"
        " & ~ *, :is(html) & div { HIDE } @media all { #ehs-system { HIDE } } }</style><p>Hi</p>"
    ),
    "every property on every element": "<style>*, html, body, div, b, :root { HIDE }</style><p>Hi",
    "at-rules": (
        "<style>@media all { * { HIDE } } @supports (display:block) { div { HIDE } }"
        " @layer x { div { HIDE } }"
        " @scope (html) { div { HIDE } } @starting-style { div { HIDE } }"
        " @container (min-width: 1px) { div { HIDE } }"
        " @import url('data:text/css,div{display:none!important}');</style><p>Hi"
    ),
    "escapes and comments": (
        "<style>\\62 ody:has(p) #ehs-system/**/, ht\\ml #ehs-system, p { x: '}' ; } #ehs-system { HIDE }"
        " p { y: url(a;{b) } div { HIDE }</style><p>Hi"
    ),
    "overlays": (
        "<style>html { position: fixed !important; top: 0; left: 0; width: 100vw; height: 100vh;"
        " z-index: 2147483647 !important; background: #fff; margin-top: -2000px }"
        " p::before { content: 'x'; position: fixed; inset: 0; background: #fff;"
        " z-index: 2147483647 }</style>"
        "<div style='position:fixed;top:0;left:0;width:100vw;height:100vh;background:#fff;"
        "z-index:2147483647'></div><div style='margin-top:-3000px;height:3000px;background:#fff;"
        "position:relative;z-index:9'></div><p>Hi"
    ),
}
HOSTILE = {name: html.replace("HIDE", HIDE_IMPORTANT) for name, html in HOSTILE.items()}

# The second wall on its own: the contact's CSS put in the forward unscoped, as if the scoper had let it
# through whole. The system's inline, !important pins must hold by themselves.
UNSCOPED = {
    "every property on every element": f"<style>*, html, body, div, b {{{HIDE_IMPORTANT}}}</style><p>Hi",
    "the contact's box lifted over the block": (
        "<style>body > div:last-of-type, body > div + div { position: fixed !important; inset: 0 !important;"
        " z-index: 2147483647 !important; transform: none !important; overflow: visible !important;"
        " contain: none !important; margin-top: -2000px !important; background: #fff !important;"
        " height: 100vh !important }</style><p>Hi"
    ),
}


def _forward(contact: str, scoped: bool = True) -> str:
    html = sanitize(contact, scope=CONTACT_SCOPE).html if scoped else contact
    return _html_with(
        html,
        (BANNER,),
        [("From", "Mallory <mallory@corp.example>"), ("Date", "Sat, 28 Nov 2026 10:00:00 +0000")],
        ["-- f --", "Conversation: c-1"],
        [],
    )


@pytest.fixture(scope="module")
def baseline() -> dict[str, Any]:
    require_chromium()
    return render(_forward("<p>Hi, a harmless mail.</p>"))


def test_the_baseline_system_block_is_shown_and_on_top(baseline: dict[str, Any]) -> None:
    assert baseline["found"]
    assert BANNER in baseline["shown"] and "mallory@corp.example" in baseline["shown"]
    top = baseline["elements"][0]
    assert top["rect"][2] > 600 and top["rect"][3] > 60  # the block spans the page, several lines high
    for el in baseline["elements"]:
        s = el["styles"]
        assert (s["visibility"], s["opacity"], s["transform"], s["scale"], s["zoom"]) == (
            "visible",
            "1",
            "none",
            "none",
            "1",
        ), el
        assert s["-webkit-text-fill-color"] == s["color"] and s["font-size"] == "13px", el
        if el["rect"][3] > 0:
            assert el["on_top"], el


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_contacts_css_cannot_move_hide_or_restyle_the_system_block(
    name: str, baseline: dict[str, Any]
) -> None:
    seen = render(_forward(HOSTILE[name]))
    assert seen["found"] and seen["shown"] == baseline["shown"]
    assert len(seen["elements"]) == len(baseline["elements"])
    for got, want in zip(seen["elements"], baseline["elements"], strict=True):
        assert got["rect"] == want["rect"], (name, got["text"])  # same place, same size: unscaled, unmoved
        assert got["styles"] == want["styles"], (name, got["text"])
        assert got["on_top"] == want["on_top"], (name, got["text"])  # nothing drawn over it


@pytest.mark.parametrize("name", sorted(UNSCOPED))
def test_the_system_blocks_own_pins_hold_even_against_unscoped_css(
    name: str, baseline: dict[str, Any]
) -> None:
    seen = render(_forward(UNSCOPED[name], scoped=False))
    assert seen["found"] and seen["shown"] == baseline["shown"]
    for got, want in zip(seen["elements"], baseline["elements"], strict=True):
        assert got["rect"] == want["rect"], (name, got["text"])
        assert got["styles"] == want["styles"], (name, got["text"])
        assert got["on_top"] == want["on_top"], (name, got["text"])
