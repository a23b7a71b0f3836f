"""The contact's HTML as a closed fragment, and each way a tracker was kept in the fourth attack
round, in our own spellings: the tracker goes, the count is right, a real photo stays."""

from __future__ import annotations

import pytest

from common.mail import htmlsafe, trackers
from common.mail.htmltext import convert

PIXEL = "https://news.us7.list-manage.com/track/open.php?u=abc&id=def"
HOST = "news.us7.list-manage.com"

EVASIONS = {
    "quoted > before src": f'<img alt="a > b" src="{PIXEL}">',
    "name with a quote": f'<img x"y=">" src="{PIXEL}">',
    "image element": f'<image src="{PIXEL}">',
    "srcset": f'<img src="cid:logo" srcset="{PIXEL} 1x, cid:logo2 2x">',
    "style background": f'<div style="background-image: url({PIXEL})">hi</div>',
    "style with escapes": (
        '<div style="background:\\75 rl(https://news.us7.list-manage.com/track/open.php)">x</div>'
    ),
    "style element": f"<style>.x {{ background: url('{PIXEL}') }}</style><p class=x>hi</p>",
    "style import": f'<style>@import "{PIXEL}";</style>',
    "background attribute": f'<table background="{PIXEL}"><tr><td>x</td></tr></table>',
    "backslashes": '<img src="https:\\\\news.us7.list-manage.com\\track\\open.php?u=1">',
    "no slashes": '<img src="https:news.us7.list-manage.com/track/open.php?u=1">',
    "tab and newline": '<img src="https://news.us7.list-\tmanage.com/track/\nopen.php">',
    "entities": '<img src="https&#x3a;&#47;&#47;news.us7.list-manage.com/track/open&period;php">',
    "upper case": '<IMG SRC="HTTPS://NEWS.US7.LIST-MANAGE.COM/track/open.php">',
    "protocol relative": '<img src="//news.us7.list-manage.com/track/open.php">',
    "hidden parent": (
        '<div style="display: none"><img src="https://cdn.other.example/a.gif" width="300"></div>'
    ),
    "hidden attribute parent": '<span hidden><img src="https://cdn.other.example/a.gif"></span>',
    "16 KB tag": f'<img data-x="{"y" * 16_500}" src="{PIXEL}">',
    "input image": f'<input type="image" src="{PIXEL}">',
    "video poster": f'<video poster="{PIXEL}"></video>',
    "link preload": f'<link rel="preload" as="image" href="{PIXEL}">',
    "picture source": f'<picture><source srcset="{PIXEL}"><img src="cid:p"></picture>',
    "unquoted then slash": f"<img src={PIXEL}/>",
    "idna host": '<img src="https://news.us7.LIST-manage.com./track/open.php">',
}


@pytest.mark.parametrize("html", EVASIONS.values(), ids=EVASIONS.keys())
def test_each_evasion_loses_its_tracker_and_is_counted_once(html: str) -> None:
    result = htmlsafe.sanitize("<p>before</p>" + html + "<p>after</p>")
    lowered = result.html.lower()
    assert "list-manage" not in lowered and "cdn.other.example" not in lowered, result.html
    assert result.removed == 1, (result.removed, result.html)
    assert "<p>before</p>" in result.html and "after" in result.html


def test_a_photo_under_another_hosts_tracking_path_is_not_a_tracker() -> None:
    photo = '<img src="https://photos.example.org/wf/open/summer.jpg" width="640">'
    assert htmlsafe.sanitize(photo).removed == 0
    assert htmlsafe.sanitize('<img src="https://u1.ct.sendgrid.net/wf/open?upn=x">').removed == 1


@pytest.mark.parametrize(
    "html",
    [
        "<!--<body></body>-->",
        "<!--[if mso]><body><![endif]-->",
        "<!-- never closed",
        "<![CDATA[ never closed",
        '<p title="never closed',
        "<p title='never closed",
        "<div x=y",
        "<plaintext>",
        "<xmp>",
        "<noscript>",
        "<template>",
        "<style>",
        "<title>",
        "<textarea>",
        "<script>",
        "<svg><style>",
        "<table><tr><td><select><option>",
        "<a href='https://example.org/'><b><i><u>",
        "</div></body></html><div>",
    ],
)
def test_the_contacts_html_is_closed_whatever_it_leaves_open(html: str) -> None:
    """The system's text after the fragment stays text a browser shows (checked with our tokenizer,
    which reads as HTML5 does: the banner is neither a comment, nor raw text, nor an attribute)."""
    fragment = htmlsafe.sanitize(html + "<p>contact</p>").html
    page = fragment + "<p>SYSTEM BANNER</p>"
    assert "SYSTEM BANNER" in convert(page).text
    assert "<!--" not in fragment and "<![" not in fragment
    opened = [
        t
        for t in ("plaintext", "xmp", "noscript", "template", "title", "script", "svg")
        if f"<{t}" in fragment
    ]
    assert not opened, fragment
    again = htmlsafe.sanitize(fragment)
    assert again.html == fragment  # canonical: reading it again changes nothing


def test_style_cannot_end_early_and_text_is_escaped() -> None:
    out = htmlsafe.sanitize("<style>p{content:'\\3c/style>'}</style><p>a &lt; b &amp; c</p>").html
    assert out.count("</style>") == 1 and "<p>a &lt; b &amp; c</p>" in out


def test_urls_are_read_as_a_browser_reads_them() -> None:
    for spelled in (
        "https:\\\\Host.Example\\a",
        " https:host.example/a",
        "HTTPS:///host.example/a",
        "//host.example/a",
        "ht\ttps://ho\nst.example/a",
        "https://user:pw@host.example:8443/a",
    ):
        url = trackers.remote(spelled)
        assert url is not None and (url.host, url.path) == ("host.example", "/a"), spelled
    idn = trackers.remote("https://bücher.example/x")
    assert idn is not None and idn.host == "xn--bcher-kva.example"
    assert trackers.remote("cid:part1") is None and trackers.remote("data:image/gif;base64,R0") is None


def test_deep_nesting_is_capped_and_closed() -> None:
    out = htmlsafe.sanitize("<blockquote>" * 10_000 + "x").html
    assert out.count("<blockquote>") == htmlsafe.MAX_DEPTH == out.count("</blockquote>")


def test_attached_html_and_messages_lose_their_trackers() -> None:
    data, removed, unread = htmlsafe.clean_part(f'<p>x</p><img src="{PIXEL}">'.encode(), "utf-8")
    assert (b"list-manage" in data, removed, unread) == (False, 1, 0)
    inner = (
        "From: a@b.example\r\nTo: c@d.example\r\nSubject: s\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
        f'<p>hi</p><img src=3D"{PIXEL}">\r\n'
    ).encode()
    data, removed, _ = htmlsafe.clean_message(inner)
    assert removed == 1 and b"list-manage" not in data and b"Subject: s" in data


def test_an_unclosed_head_does_not_hide_the_text() -> None:
    assert convert("<html><head><title>t</title><p>shown").text == "shown"
    assert convert("<head><style>p{}</style>shown too").text == "shown too"
    assert convert("<head><meta charset=utf-8></head><body>body").text == "body"


def test_the_contacts_css_applies_only_inside_its_box() -> None:
    """``p { display: none }`` in the contact's <style> would hide the banner (a <p>) in a client that
    applies style elements: scoped, it reaches the contact's own elements only."""
    css = (
        "p{display:none} body{visibility:hidden} html body .a, :root > p {color:red} + p{x:y} ~ p{x:y} "
        "@media (max-width:600px){ div{display:none} } @import url(https://cdn.example/x.css); "
        "@font-face{font-family:f}"
    )
    out = htmlsafe.sanitize(f"<style>{css}</style><p class=a>hi</p>", scope="box").html
    assert out.startswith('<div class="box" style="') and out.endswith("</div>")
    style = out[out.index("<style>") + 7 : out.index("</style>")]
    assert style == (
        ".box p{display:none}.box{visibility:hidden}.box .a, .box > p{color:red}"
        "@media (max-width:600px){.box div{display:none}}@font-face{font-family:f}"
    )
    assert "contain:paint" in out  # position: fixed or a negative margin cannot paint over the banner


@pytest.mark.parametrize(
    "html",
    [
        f'<body background="{PIXEL}"><p>x</p></body>',
        f'<iframe src="{PIXEL}"></iframe>',
        f'<object data="{PIXEL}"></object>',
        f'<svg><image href="{PIXEL}"/></svg>',
        f'<link rel="stylesheet" href="{PIXEL}">',
        '<img src="https://news.us7.list-manage.com/a/../TRACK//open.php">',
        '<img src="https://news.us7.list-manage.com/%74rack/./open.php">',
    ],
)
def test_what_a_dropped_element_would_have_loaded_is_counted(html: str) -> None:
    result = htmlsafe.sanitize(html)
    assert result.removed == 1 and "list-manage" not in result.html, result


# --- judged by an independent parser (html5lib; tinycss2 for the CSS), never our own tokenizer -------

HOSTILE_HTML = [
    "<!--<body></body>--><p>Hi</p>",
    "<!--[if mso]><p>Hi</p>",
    "<plaintext><p>Hi",
    "<xmp></xmp><p>",
    "<textarea><p>",
    "<title></title><p>",
    "<svg><style><img src=x onerror=alert(1)></style></svg>",
    "<math><mi><mglyph><style><img src=x onerror=alert(1)>",
    "<template><p>",
    "<noscript><p title='</noscript><img src=x onerror=alert(1)>'>",
    "<table><tr><td><select><option><style>",
    "<a href='javascript:alert(1)'>x</a><a href=' jav&#x09;ascript:alert(1)'>y</a>",
    "<img src=x onerror=alert(1) ONLOAD=x>",
    "<style>p{}</style><style>",
    "<div a=\"</div>\"><p b='<!--'>",
    "<p>a<b>b<i>c</p></div></div></body></html><div>",
    "<iframe srcdoc='<script>alert(1)</script>'></iframe><script>alert(1)</script>",
    "<object data=x><embed src=x><base href=//evil.example/><meta http-equiv=refresh content=0;url=x>",
    "<style>p{ body:has(&) #ehs-system{display:none} } @import 'x'; :root{zoom:.1}</style><p>",
    "<form><input type=image src=x formaction=javascript:alert(1)>",
]
_BAD_TAGS = {
    "script",
    "iframe",
    "object",
    "embed",
    "base",
    "meta",
    "link",
    "svg",
    "math",
    "template",
    "frame",
}


@pytest.mark.parametrize("html", HOSTILE_HTML)
def test_the_output_read_by_html5lib_is_closed_and_inert(html: str) -> None:
    from tests.support import judge

    out = htmlsafe.sanitize(html, scope="seh-contact").html
    doc = judge.tree(f'<div id="before"></div>{out}<div id="after">SYSTEM</div>')
    body = next(el for el in doc.iter() if el.tag == judge.NS + "body")
    # The fragment is closed: what follows it in the forward is a sibling of what precedes it.
    assert [el.get("id") for el in body if el.get("id")] == ["before", "after"], out
    assert "".join(body[-1].itertext()) == "SYSTEM"
    assert not _BAD_TAGS & set(judge.tags(doc)), out
    for el in doc.iter():
        for name, value in el.attrib.items():
            assert not name.lower().startswith("on"), out
            assert not value.strip().lower().startswith(("javascript:", "vbscript:")), out


@pytest.mark.parametrize(
    "html", HOSTILE_HTML + [f"<style>{c}</style>" for c in ("p,a{x:y}", "html{}", "@media x{p{}}")]
)
def test_every_style_rule_html5lib_finds_is_confined(html: str) -> None:
    import tinycss2

    from tests.support import judge

    out = htmlsafe.sanitize(html, scope="seh-contact").html
    for el in judge.fragment(out).iter(judge.NS + "style"):
        todo = list(tinycss2.parse_stylesheet(el.text or "", skip_comments=True, skip_whitespace=True))
        while todo:
            rule = todo.pop()
            if rule.type == "at-rule" and rule.lower_at_keyword in (
                "media",
                "supports",
                "container",
                "layer",
            ):
                todo += tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True)
            elif rule.type == "qualified-rule":
                for sel in tinycss2.serialize(rule.prelude).split(","):
                    assert sel.strip() == ".seh-contact" or sel.strip().startswith(".seh-contact "), out


# --- the whole forward, read by html5lib: hostile shapes a parser differential has used ---------------

PARSER_DIFFERENTIALS = [
    "<b><i>mis</b>nested</i><a href=https://a.example/><div><a href=https://b.example/>x</a></div></a>",
    "<noscript><style></noscript><img src=x onerror=alert(1)></style>",
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "<template><script>alert(1)</script><img src=x onerror=alert(1)></template>",
    "<!-- <script>alert(1)</script>",
    "<!--><script>alert(1)</script>-->",
    '<img title="</script><script>alert(1)</script>"><p title="</style><script>alert(1)</script>">',
    '<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">',
    '<math><mi><mglyph><svg><mtext><textarea><path id="</textarea><img onerror=alert(1) src=1>">',
    '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">',
    "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>",
    "<svg><![CDATA[><img src=x onerror=alert(1)>]]></svg><![CDATA[<script>alert(1)</script>]]>",
    "<scr\x00ipt>alert(1)</script><img src=x o\x00nerror=alert(1)><a href='java\x00script:alert(1)'>x</a>",
    "<base href='javascript:alert(1)//'><meta http-equiv=refresh content='0;url=javascript:alert(1)'>",
    "<img srcset='javascript:alert(1) 1x, https://a.example/p.png 2x'><source srcset=javascript:alert(1)>",
    "<p style='width:expression(alert(1));color:red'>a</p>"
    "<p style=\"background:url('javascript:alert(1)')\">b",
    "<style>p{background:url(javascript:alert(1));color:red} a{width:expression(alert(1))}</style><p>c",
    "<a href='&#106;avascript:alert(1)'>x</a><a href='\tjavascript:alert(1)'>y</a><a href=vbscript:x>z</a>",
    "<table><td><select><option><iframe src=javascript:alert(1)></iframe><xmp><script></xmp>",
    "<plaintext></div></body><script>alert(1)</script>",
    "<frameset onload=alert(1)><frame src=javascript:alert(1)>",
    "<body onload=alert(1) style='display:none'><html hidden><p>Hi",
]


def _active(value: str) -> bool:
    head = "".join(c for c in value if c > " ").lower()
    return head.startswith(("javascript:", "vbscript:"))


@pytest.mark.parametrize("html", PARSER_DIFFERENTIALS + HOSTILE_HTML)
def test_the_forward_read_by_html5lib_shows_the_banner_first_and_runs_nothing(html: str) -> None:
    """The forward as the owner's client gets it (the system's block, then the contact's sanitised
    HTML in its box), read by html5lib, never by the parser under test: no script, no event handler,
    no script URL or CSS expression anywhere; the banner present, first in the body, not hidden."""
    from common.delivery.compose import CONTACT_SCOPE, _html_with
    from tests.support import judge

    banner = "DMARC check failed: this mail may be forged"
    contact = htmlsafe.sanitize(html, scope=CONTACT_SCOPE).html
    doc = judge.tree(_html_with(contact, (banner,), [("From", "Eve <eve@corp.example>")], ["-- f --"], []))
    assert "script" not in judge.tags(doc), contact
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue
        for name, value in el.attrib.items():
            assert not name.lower().startswith("on"), contact
            assert not _active(value), contact
            if name in ("srcset", "imagesrcset"):
                assert not any(_active(c) for c in value.split(",")), contact
        css = el.attrib.get("style", "") + (el.text or "" if el.tag == judge.NS + "style" else "")
        assert "expression(" not in css.lower() and not any(_active(u) for u in judge.css_urls(css)), contact
    body = next(el for el in doc.iter() if el.tag == judge.NS + "body")
    first = body[0]
    assert first.get("id") == "ehs-system" and banner in "".join(first.itertext()), contact
    assert len(body) == 2 and CONTACT_SCOPE in "".join(body[1][0].get("class", "")), contact
    for el in (doc, body, first, *first.iter()):
        style = el.get("style", "").replace(" ", "").lower()
        assert "hidden" not in el.attrib and "display:none" not in style, contact
        assert "visibility:visible!important" in style, contact
