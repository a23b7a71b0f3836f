"""The contact's CSS as a browser reads it: common.mail.csstoken tokenizes as tinycss2 (an independent
CSS Syntax Level 3 tokenizer) does, and what common.mail.cssscope writes out is, read by tinycss2,
only rules confined to the contact's box, with no nested rule left to escape it."""

from __future__ import annotations

import random
from typing import Any

import pytest
import tinycss2
import tinycss2.ast

from common.mail import csstoken
from common.mail.cssscope import rewrite

TRICKY = [
    "p{color:red}",
    "a/**/b",
    "/* unclosed",
    '"abc\nx',
    '"abc',
    "'a\\'b'",
    "url(a b)",
    'url(a"b)',
    "url( x.png )",
    "u\\72l(x)",
    "URL(x)",
    'url("q")',
    "url(a\\)b)",
    "<!-- -->",
    "\\",
    "a\\",
    "1e3 1e 1E+2x .5 +.5e-1 -0 50% 1.5em -2px 3\\65 m",
    "#1a #-b #\\31",
    "@-x @media @\\6d edia",
    "-- --x -->",
    "-\\31 a -1a -.5",
    ") ] }",
    "f(a(b)c)d",
    "[{(]})",
    "a:hover{x:y;&.b{z:w}}",
    "@import 'x';",
    "ÿ€😀 ident-😀",
    "\x00\r\n\f",
]


def _tiny(nodes: list[Any]) -> list[tuple[Any, ...]]:
    """tinycss2's tokens, flattened (blocks opened, their contents, no closers)."""
    out: list[tuple[Any, ...]] = []
    for n in nodes:
        t = n.type
        if t == "comment":
            continue
        if t == "whitespace":
            out.append(("ws",))
        elif t in ("ident", "at-keyword"):
            out.append((t, n.lower_value))
        elif t in ("hash", "string", "url") or t in ("number", "percentage"):
            out.append((t, n.value))
        elif t == "dimension":
            out.append((t, n.value, n.lower_unit))
        elif t == "literal":
            out.append(("literal", n.value))
        elif t == "error":
            out.append(("error", n.kind))
        elif t == "function":
            out.append(("function", n.lower_name))
            out += _tiny(n.arguments)
        else:  # () [] {} blocks
            out.append(("block", n.type[:2]))
            out += _tiny(n.content)
    return out


_KIND = {
    csstoken.IDENT: "ident",
    csstoken.AT: "at-keyword",
    csstoken.HASH: "hash",
    csstoken.STRING: "string",
    csstoken.URL: "url",
    csstoken.NUMBER: "number",
    csstoken.PERCENT: "percentage",
}


def _ours(css: str) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    toks = csstoken.tokenize(css)
    closers = {t.end for t in toks if t.kind in (csstoken.OPEN, csstoken.FUNCTION)}
    for i, t in enumerate(toks):
        if t.kind == csstoken.WS:
            if t.text != "/**/" and not (out and out[-1] == ("ws",)):
                out.append(("ws",))
        elif t.kind in _KIND:
            out.append(
                (_KIND[t.kind], t.number if t.kind in (csstoken.NUMBER, csstoken.PERCENT) else t.value)
            )
        elif t.kind == csstoken.DIMENSION:
            out.append(("dimension", t.number, t.value))
        elif t.kind == csstoken.FUNCTION:
            out.append(("function", t.value))
        elif t.kind == csstoken.OPEN:
            out.append(("block", t.text + {"(": ")", "[": "]", "{": "}"}[t.text]))
        elif t.kind == csstoken.CLOSE:
            if i not in closers:
                out.append(("error", t.text))
        elif t.kind == csstoken.BAD_STRING:
            out.append(("error", "bad-string"))
        elif t.kind == csstoken.BAD_URL:
            out.append(("error", "bad-url"))
        else:  # delims, ":", ";", ",", CDO, CDC
            out.append(("literal", t.text))
    return out


def _fuzz(seed: int, count: int) -> list[str]:
    """Strings from the characters that decide CSS tokens, seeded (the same cases every run)."""
    rng = random.Random(seed)
    alphabet = list("ab1-_.+e%#@\\\"'(){}[]:;,/*!<>& \n\t") + [
        "url(",
        "--",
        "/*",
        "*/",
        "\\31 ",
        "é",
        "html",
        "&",
    ]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(count)]


CORPUS = TRICKY + _fuzz(44, 600)


def _tiny_tokens(css: str) -> list[tuple[Any, ...]]:
    flat = _tiny(tinycss2.parse_component_value_list(css, skip_comments=True))
    merged: list[tuple[Any, ...]] = []
    for tok in flat:
        if tok == ("ws",) and merged and merged[-1] == ("ws",):
            continue  # a comment between two white spaces: one run either way
        if tok[0] == "error" and tok[1].startswith("eof-in-"):
            continue  # tinycss2 notes a string or URL the end closed; ours marks it (Token.eof)
        merged.append(tok)
    return merged


@pytest.mark.parametrize("css", CORPUS)
def test_tokens_are_read_as_tinycss2_reads_them(css: str) -> None:
    assert _ours(css) == _tiny_tokens(css)


def _selectors_and_nesting(css: str, scope: str) -> tuple[list[str], list[str]]:
    """(every selector of every style rule, every nested rule or at-rule inside a style rule) as
    tinycss2 reads ``css``, grouping rules followed."""
    selectors: list[str] = []
    nested: list[str] = []
    todo = list(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True))
    while todo:
        rule = todo.pop()
        if rule.type == "qualified-rule":
            text = tinycss2.serialize(rule.prelude).strip()
            selectors += [s.strip() for s in text.split(",")]
            for item in tinycss2.parse_blocks_contents(
                rule.content, skip_comments=True, skip_whitespace=True
            ):
                if item.type in ("qualified-rule", "at-rule"):
                    nested.append(tinycss2.serialize([item]))
        elif rule.type == "at-rule" and rule.lower_at_keyword in ("media", "supports", "container", "layer"):
            todo += tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True)
    return selectors, nested


HOSTILE_SHEETS = [
    "p { color: red; body:has(&) #ehs-system { display: none } & ~ * { display: none } }",
    "p { @media all { #ehs-system { display: none } } }",
    ":root, html, body, html body > p, :ROOT .a { zoom: 0.01 }",
    "+ p, ~ p, || td, p { x: y }",
    "a; #ehs-system { display: none }",
    "@media all { @media all { @supports (x:y) { @layer { @container (a) { p { x: y } } } } } }",
    "@scope (html) { div { display: none } } @starting-style { div { opacity: 0 } }",
    "p { x: '}' ; } #ehs-system { display: none }",
    "p { y: url(a;{b) } div { x: y }",
    "p { x: {} } q { a: b {c: d} }",
    'p { content: "abc',
    "p{x:a\\",
    "a/**/b, a//**/*/b { x: y }",
]


@pytest.mark.parametrize("css", HOSTILE_SHEETS + CORPUS)
def test_every_rule_written_out_is_confined_to_the_scope_and_nests_nothing(css: str) -> None:
    out, _ = rewrite(css, "S")
    selectors, nested = _selectors_and_nesting(out, "S")
    assert not nested, (css, out)
    for selector in selectors:
        assert selector == ".S" or selector.startswith(".S "), (css, out, selector)
        assert not selector[3:].lstrip().startswith(("+", "~", "|")), (css, out)
    # And nothing of it reads differently once written out: tinycss2 reads our output as we do.
    assert _ours(out) == _tiny_tokens(out)


def test_nested_rules_go_and_declarations_stay() -> None:
    out, _ = rewrite("html { color: red; body:has(&) #x { display: none } margin: 0 }", "S")
    assert out == ".S{color:red;margin:0}"


def test_kept_at_rules_keep_only_declarations() -> None:
    out, _ = rewrite(
        "@font-face { font-family: x; src: url(f.woff); p { x: y } } @keyframes k { from { opacity: 0 }"
        " to { opacity: 1; q { r: s } } } @import url(x.css); @namespace x url(y);",
        "S",
    )
    assert out == "@font-face{font-family:x;src:url(f.woff)}@keyframes k{from{opacity:0}to{opacity:1}}"


def _work(run: Any, text: str) -> int:
    """How many Python lines and calls ``run(text)`` executes (sys.monitoring): the work of a pass,
    counted instead of timed."""
    import sys

    mon = sys.monitoring
    tool = mon.PROFILER_ID
    count = 0

    def seen(*_: Any) -> None:
        nonlocal count
        count += 1

    mon.use_tool_id(tool, "work-count")
    try:
        mon.register_callback(tool, mon.events.LINE, seen)
        mon.register_callback(tool, mon.events.CALL, seen)
        mon.set_events(tool, mon.events.LINE | mon.events.CALL)
        run(text)
    finally:
        mon.set_events(tool, 0)
        mon.free_tool_id(tool)
    return count


def _passes() -> dict[str, Any]:
    from common.mail import htmlsafe, htmltext, trackers

    # The parse itself runs in C (lexbor) and is not counted here: bench/html_text.py times it.
    return {
        "sanitiser": lambda h: htmlsafe.sanitize(h, scope="S"),
        "css scoper": lambda h: rewrite(h, "S"),
        "text": htmltext.convert,
        "trackers": lambda h: trackers.clean_stylesheet(h, "S"),
    }


# The shapes each pass finds hardest, as (head, unit repeated n times, tail).
SHAPES = {
    "repeated root selector": ("<style>", "html ", "{color:red}</style>"),
    "repeated root rules": ("<style>", ":root{x:y}", "</style>"),
    "nested blocks": ("<style>p{", "{(", "</style>"),
    "grouping rules": ("<style>", "@media x{", "</style>"),
    "declarations": ("<style>p{", "a:url(https://x.example/a.png);", "}</style>"),
    "nested rules": ("<style>p{", "& a{b:c}", "}</style>"),
    "unclosed strings": ("<style>p{x:", "'a\n", "}</style>"),
    "escapes": ("<style>", "\\31 \\", "</style>"),
    "comments": ("<style>", "/*/**", "</style>"),
    "style attributes": ("", '<img src="https://x.example/a.png" style="width:0.1em;height:1pt">', ""),
    "open tags": ("", "<div style='a:b'>", ""),
}


@pytest.mark.parametrize("pass_name", sorted(_passes()))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_pass_does_linear_work_on_its_worst_shapes(pass_name: str, shape: str) -> None:
    """4x the input costs about 4x the work (quadratic would be 16x); counted, not timed. The
    bench (python -m bench html) times the same passes at 1x, 2x and 4x."""
    head, unit, tail = SHAPES[shape]
    run = _passes()[pass_name]
    n = 400
    small = _work(run, head + unit * n + tail)
    large = _work(run, head + unit * 4 * n + tail)
    assert large <= 6 * small + 2_000, (small, large)


def test_the_repeated_root_selector_mail_is_scoped_whole() -> None:
    from common.mail import htmlsafe

    html = "<style>" + "html " * 15_000 + "{color:red} p{color:blue}</style><p>Hi"
    out = htmlsafe.sanitize(html, scope="S").html
    assert "<style>.S{color:red}.S p{color:blue}</style>" in out
