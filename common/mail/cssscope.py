"""A contact's ``<style>`` confined to the contact's part of the forward.

CSS in a ``<style>`` element applies to the whole document, so ``p { display: none }`` would hide the
system's banner too. As webmail does (Roundcube prefixes each selector with its message container),
every selector is rewritten to match only inside the element with ``scope`` as its class: ``p, .a b``
becomes ``.scope p, .scope .a b``; ``html``, ``body`` and ``:root`` at a selector's start become the
scope itself; a selector starting with a sibling combinator (``+ p``, ``~ p``: the scope's siblings)
is dropped. Inside ``@media``, ``@supports``, ``@container`` and ``@layer`` the rules are scoped the
same way; ``@font-face``, ``@keyframes``, ``@page``, ``@counter-style`` and ``@property`` have no
selectors and are kept; any other at-rule (``@import`` of a stylesheet no one scoped, ``@namespace``)
is dropped. Comments are dropped. One pass over the text, strings and nesting followed.
"""

from __future__ import annotations

_GROUPING = ("@media", "@supports", "@container", "@layer", "@document", "@-moz-document", "@scope")
_KEPT_BLOCKS = ("@font-face", "@keyframes", "@-webkit-keyframes", "@page", "@counter-style", "@property")


def _skip_string(css: str, pos: int) -> int:
    """From the opening quote at ``pos`` to just after its closing quote (or the end)."""
    quote, pos, n = css[pos], pos + 1, len(css)
    while pos < n and css[pos] != quote and css[pos] != "\n":
        pos += 2 if css[pos] == "\\" else 1
    return min(pos + 1, n)


def _without_comments(css: str) -> str:
    out, pos, n = [], 0, len(css)
    while pos < n:
        c = css[pos]
        if c in "\"'":
            end = _skip_string(css, pos)
            out.append(css[pos:end])
            pos = end
        elif css.startswith("/*", pos):
            close = css.find("*/", pos + 2)
            pos = n if close < 0 else close + 2
            out.append(" ")
        else:
            out.append(c)
            pos += 1
    return "".join(out)


def _until(css: str, pos: int, stops: str) -> int:
    """The position of the first of ``stops`` at this nesting level from ``pos`` (or the end)."""
    depth, n = 0, len(css)
    while pos < n:
        c = css[pos]
        if c in "\"'":
            pos = _skip_string(css, pos)
            continue
        if c == "\\":
            pos += 2
            continue
        if depth == 0 and c in stops:
            return pos
        if c in "([{":
            depth += 1
        elif c in ")]}" and depth:
            depth -= 1
        pos += 1
    return n


def _selectors(prelude: str, scope: str) -> str:
    out = []
    pos = 0
    while pos <= len(prelude):
        end = _until(prelude, pos, ",")
        one = prelude[pos:end].strip()
        pos = end + 1
        if not one or one[0] in "+~|":
            continue
        head = one.lstrip()
        for root in ("html", "body", ":root"):
            while head.lower().startswith(root) and (len(head) == len(root) or not _ident(head[len(root)])):
                head = head[len(root) :].lstrip()
        if head.startswith((">", "+", "~")) and head[0] != ">":
            continue
        out.append(f".{scope} {head}".rstrip() if head else f".{scope}")
    return ", ".join(out)


def _ident(c: str) -> bool:
    return c.isalnum() or c in "-_\\" or ord(c) > 127


MAX_GROUP_DEPTH = 4  # @media inside @supports inside ...: each level is read once more


def _rules(css: str, scope: str, depth: int = 0) -> str:
    out: list[str] = []
    pos, n = 0, len(css)
    while pos < n:
        end = _until(css, pos, "{;}")
        prelude = css[pos:end].strip()
        if end >= n:  # a prelude with no block: nothing a browser would apply
            break
        if css[end] in ";}":
            pos = end + 1
            continue  # a statement at-rule (@import, @charset, @namespace) or stray text: dropped
        close = _until(css, end + 1, "}")
        body = css[end + 1 : close]
        pos = close + 1
        if prelude.startswith("@"):
            name = prelude.split(None, 1)[0].lower() if prelude.split() else ""
            name = name.split("(", 1)[0]
            if name in _GROUPING and depth < MAX_GROUP_DEPTH:
                out.append(f"{prelude}{{{_rules(body, scope, depth + 1)}}}")
            elif name in _KEPT_BLOCKS:
                out.append(f"{prelude}{{{body}}}")
            continue
        selectors = _selectors(prelude, scope)
        if selectors:
            out.append(f"{selectors}{{{body}}}")
    return "".join(out)


def scope_css(css: str, scope: str) -> str:
    """``css`` with every rule confined to the descendants of ``.scope`` (and ``.scope`` itself for
    html/body/:root)."""
    return _rules(_without_comments(css), scope)
