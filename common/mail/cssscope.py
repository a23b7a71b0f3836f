"""A contact's ``<style>`` confined to the contact's part of the forward.

CSS in a ``<style>`` element applies to the whole document, so ``p { display: none }`` would hide the
system's banner too. As webmail does (Roundcube prefixes each selector with its message container),
every selector is rewritten to match only inside the element with ``scope`` as its class: ``p, .a b``
becomes ``.scope p, .scope .a b``; ``html``, ``body`` and ``:root`` at a selector's start become the
scope itself; a selector starting with a sibling or column combinator (``+ p``, ``~ p``, ``|| p``: the
scope's siblings) is dropped.

The stylesheet is read by the one CSS tokenizer (``common.mail.csstoken``) and written out again from
what was understood, never copied through, so nothing the contact wrote is read by a browser in a way
the scoper did not read it (docs/security.md, "The contact's CSS"):
- a style rule keeps only its declarations (``name: value``); a nested rule or at-rule inside it is
  dropped, since a nested selector with ``&`` (``body:has(&) #x``) is not under the scope;
- a declaration holding a ``{}`` block, a bad string or a bad URL is dropped (a browser would read
  it as a nested rule, or cut it elsewhere), and so is one calling ``expression()`` or naming a
  ``javascript:`` or ``vbscript:`` URL;
- inside ``@media``, ``@supports``, ``@container`` and ``@layer`` the rules are scoped the same way, at
  most MAX_GROUP_DEPTH deep; ``@font-face``, ``@page``, ``@counter-style`` and ``@property`` keep their
  declarations, ``@keyframes`` its keyframes' declarations; every other at-rule (``@import``,
  ``@namespace``, ``@scope``, ``@document``, ``@starting-style``) is dropped.
Comments are dropped. Each token is read once: linear in the input.
"""

from __future__ import annotations

from collections.abc import Callable

from common.mail.csstoken import (
    AT,
    BAD_STRING,
    BAD_URL,
    CDC,
    CDO,
    CLOSE,
    COLON,
    COMMA,
    DELIM,
    FUNCTION,
    IDENT,
    OPEN,
    SEMI,
    STRING,
    URL,
    WS,
    Token,
    skip,
    text,
    tokenize,
)

_GROUPING = frozenset({"media", "supports", "container", "layer"})
_DECLARATIONS = frozenset({"font-face", "page", "counter-style", "property", "font-palette-values"})
_KEYFRAMES = frozenset({"keyframes", "-webkit-keyframes", "-moz-keyframes"})
_ROOTS = frozenset({"html", "body"})
MAX_GROUP_DEPTH = 4

# Decides a declaration's fate: given its tokens (name to value's end), how many tracker URLs it
# loads; a declaration with any is dropped and counted (common.mail.trackers).
Filter = Callable[[list[Token]], int]


class _Walk:
    def __init__(self, toks: list[Token], scope: str, loads: Filter | None) -> None:
        self.t = toks
        self.scope = scope
        self.loads = loads
        self.removed = 0

    def rules(self, i: int, stop: int, depth: int) -> str:
        """The rules of the tokens ``i:stop`` (a stylesheet or a grouping rule's block), rewritten."""
        t, out = self.t, []
        while i < stop:
            tok = t[i]
            if tok.kind in (WS, CDO, CDC, SEMI, CLOSE):
                i += 1
                continue
            j = i
            while j < stop and not (t[j].kind == OPEN and t[j].text == "{"):
                if t[j].kind == SEMI and tok.kind == AT:
                    break
                j = skip(t, j)
            if j >= stop or t[j].kind == SEMI:  # a statement at-rule (@import, @charset) or stray text
                i = j + 1
                continue
            block_end = min(t[j].end, stop)
            out.append(self.rule(i, j, block_end, depth))
            i = block_end + 1
        return "".join(out)

    def rule(self, start: int, brace: int, close: int, depth: int) -> str:
        t = self.t
        prelude = text(t, start, brace).strip()
        if _unsafe(t, start, brace):
            return ""
        if t[start].kind == AT:
            name = t[start].value
            if name in _GROUPING and depth < MAX_GROUP_DEPTH:
                inner = self.rules(brace + 1, close, depth + 1)
                return f"{prelude}{{{inner}}}" if inner else ""
            if name in _DECLARATIONS:
                return f"{prelude}{{{self.declarations(brace + 1, close)}}}"
            if name in _KEYFRAMES:
                return f"{prelude}{{{self.keyframes(brace + 1, close)}}}"
            return ""
        selectors = self.selectors(start, brace) if self.scope else prelude
        return f"{selectors}{{{self.declarations(brace + 1, close)}}}" if selectors else ""

    def keyframes(self, i: int, stop: int) -> str:
        t, out = self.t, []
        while i < stop:
            j = i
            while j < stop and not (t[j].kind == OPEN and t[j].text == "{"):
                j = skip(t, j)
            if j >= stop:
                break
            end = min(t[j].end, stop)
            if t[i].kind != AT and not _unsafe(t, i, j):
                out.append(f"{text(t, i, j).strip()}{{{self.declarations(j + 1, end)}}}")
            i = end + 1
        return "".join(out)

    def declarations(self, i: int, stop: int) -> str:
        """The block's declarations, each ``name:value``; nested rules and at-rules dropped. A nested
        rule ends with its block, as a browser reads it (CSS Syntax 3, "consume a block's
        contents"), so a declaration after it is still read."""
        t, out = self.t, []
        while i < stop:
            j = i
            while j < stop and t[j].kind != SEMI and not (t[j].kind == OPEN and t[j].text == "{"):
                j = skip(t, j)
            if j < stop and t[j].kind == OPEN and not self._block_value(i, j, stop):
                i = min(t[j].end, stop) + 1  # a nested rule or at-rule: dropped whole
                continue
            while j < stop and t[j].kind != SEMI:
                j = skip(t, j)
            decl = self.declaration(i, min(j, stop))
            if decl:
                out.append(decl)
            i = j + 1
        return ";".join(out)

    def _block_value(self, i: int, brace: int, stop: int) -> bool:
        """Whether ``i:brace`` is ``name:`` and the ``{}`` block at ``brace`` all its value (read as a
        declaration, which is then dropped for its block), rather than a nested rule's prelude."""
        t = self.t
        head = [k for k in t[i:brace] if k.kind != WS]
        if len(head) != 2 or head[0].kind != IDENT or head[1].kind != COLON:
            return False
        k = min(t[brace].end, stop) + 1
        while k < stop and t[k].kind == WS:
            k += 1
        return k >= stop or t[k].kind == SEMI

    def declaration(self, i: int, stop: int) -> str:
        t = self.t
        while i < stop and t[i].kind == WS:
            i += 1
        if i >= stop or t[i].kind != IDENT:
            return ""
        colon = i + 1
        while colon < stop and t[colon].kind == WS:
            colon += 1
        if colon >= stop or t[colon].kind != COLON or _unsafe(t, colon + 1, stop):
            return ""
        if _scripted(t, colon + 1, stop):
            return ""
        if self.loads is not None and (found := self.loads(t[i:stop])):
            self.removed += found
            return ""
        value = text(t, colon + 1, stop).strip()
        return f"{t[i].text}:{value}" if value else ""

    def selectors(self, i: int, stop: int) -> str:
        t, out = self.t, []
        while i <= stop:
            j = i
            while j < stop and t[j].kind != COMMA:
                j = skip(t, j)
            one = self.selector(i, min(j, stop))
            if one:
                out.append(one)
            i = j + 1
        return ", ".join(out)

    def selector(self, i: int, stop: int) -> str:
        t = self.t
        while True:  # html, body and :root at the start are the scope itself
            while i < stop and t[i].kind == WS:
                i += 1
            if i < stop and t[i].kind == IDENT and t[i].value in _ROOTS:
                i += 1
            elif i + 1 < stop and t[i].kind == COLON and t[i + 1].kind == IDENT and t[i + 1].value == "root":
                i += 2
            else:
                break
        rest = text(t, i, stop).strip()
        if i < stop and t[i].kind == DELIM and t[i].text in "+~|":
            return ""
        return f".{self.scope} {rest}" if rest else f".{self.scope}"


def _unsafe(t: list[Token], i: int, stop: int) -> bool:
    """Whether the tokens hold what a browser could read differently once written out: a ``{}``
    block (a nested rule), a ``}`` or ``;`` of no block, a bad string or URL, or anything the end of
    the input closed (a string, a URL, a block, an escape): what follows in the output would
    continue it."""
    for k in range(i, stop):
        tok = t[k]
        kind = tok.kind
        if kind in (BAD_STRING, BAD_URL, SEMI) or tok.text.endswith("\\") or tok.text == "}":
            return True
        if kind == OPEN and tok.text == "{":
            return True
        if kind in (OPEN, FUNCTION) and tok.end >= stop:
            return True
        if tok.eof:
            return True
    return False


_SCRIPT_SCHEMES = ("javascript:", "vbscript:")
_URL_NOISE = "".join(chr(c) for c in range(0x21))


def _scripted(t: list[Token], i: int, stop: int) -> bool:
    """Whether a declaration's value calls ``expression()`` (old Internet Explorer ran it as script)
    or names a ``javascript:``/``vbscript:`` URL: dropped, whatever the client."""
    for k in range(i, stop):
        tok = t[k]
        if tok.kind == FUNCTION and tok.value == "expression":
            return True
        if tok.kind in (URL, STRING):
            head = tok.value.strip(_URL_NOISE).replace("\t", "").replace("\n", "").replace("\r", "")
            if head[:11].lower().startswith(_SCRIPT_SCHEMES):
                return True
    return False


def rewrite(css: str, scope: str, loads: Filter | None = None) -> tuple[str, int]:
    """``css`` rewritten (see the module's docstring): every rule confined to ``.scope`` when
    ``scope`` is given, and without the declarations ``loads`` counts URLs in; how many it counted."""
    walk = _Walk(tokenize(css), scope, loads)
    out = walk.rules(0, len(walk.t), 0)
    return out, walk.removed


def declarations(css: str, loads: Filter | None = None) -> tuple[str, int]:
    """A ``style`` attribute's declarations rewritten the same way, and how many URLs ``loads``
    counted in the dropped ones."""
    walk = _Walk(tokenize(css), "", loads)
    return walk.declarations(0, len(walk.t)), walk.removed


def scope_css(css: str, scope: str) -> str:
    """``css`` with every rule confined to the descendants of ``.scope`` (and ``.scope`` itself for
    html/body/:root)."""
    return rewrite(css, scope)[0]
