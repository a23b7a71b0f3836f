"""The one CSS tokenizer: the forward's CSS scoper (``cssscope``) and tracker reading (``trackers``)
read a stranger's CSS through it, token by token as a browser does (CSS Syntax Level 3, section 4).

Tokens are whole: a string, a ``url(...)``, a comment or an escaped name is one token, so a ``;``,
``{`` or ``}`` inside one never cuts a declaration or a rule. Blocks (``{}``, ``[]``, ``()`` and
functions) are matched as CSS Syntax 3 section 5 matches them: a closer that is not the innermost
opener's is an ordinary token, an opener left open is closed by the end of the input.

Linear: each token is one regular-expression match that only moves forward (possessive repeats), and
blocks are matched in one pass with a stack. tinycss2 tokenizes the same way and is the oracle of the
tests (tests/unit/test_csstoken.py); it is not used here because it reads about 1 MB of CSS in
seconds, where this reads it in a fraction of one (docs/decisions.md, CSS tokenizer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Token kinds (CSS Syntax 3, 4): names as the spec gives them.
WS, IDENT, FUNCTION, AT, HASH, STRING, BAD_STRING, URL, BAD_URL = range(9)
NUMBER, PERCENT, DIMENSION, DELIM, CDO, CDC, COLON, SEMI, COMMA = range(9, 18)
OPEN, CLOSE, COMMENT = 18, 19, 20  # OPEN: "(", "[", "{" (FUNCTION opens too); CLOSE: ")", "]", "}"

_ESC = r"\\(?:[0-9A-Fa-f]{1,6}[ \t\n]?|[^\n0-9A-Fa-f]|\Z)"
_NAME_CHAR = rf"(?:[A-Za-z0-9_\-\x80-\U0010ffff]|{_ESC})"
_NAME_START = rf"(?:[A-Za-z_\x80-\U0010ffff]|{_ESC})"
_IDENT = rf"(?:--|-?{_NAME_START}){_NAME_CHAR}*+"
_NUM = r"[+-]?+(?:[0-9]++(?:\.[0-9]++)?+|\.[0-9]++)(?:[eE][+-]?[0-9]++)?"
_TOKEN = re.compile(
    r"(?P<comment>/\*(?:[^*]++|\*(?!/))*+(?P<cmtend>\*/)?+)"
    r"|(?P<ws>[ \t\n]++)"
    r"|(?P<str>\"(?:[^\"\\\n]++|\\[\s\S]?+)*+(?:(?P<q1>\")|(?P<bad1>(?=\n)))?+"
    r"|'(?:[^'\\\n]++|\\[\s\S]?+)*+(?:(?P<q2>')|(?P<bad2>(?=\n)))?+)"
    rf"|(?P<num>{_NUM})(?:(?P<pct>%)|(?P<unit>{_IDENT}))?+"
    r"|(?P<cdc>-->)"
    rf"|(?P<ident>{_IDENT})(?P<fn>\()?+"
    rf"|@(?P<at>{_IDENT})"
    rf"|\#(?P<hash>{_NAME_CHAR}++)"
    r"|(?P<cdo><!--)"
    r"|(?P<punct>[:;,(\[{)\]}])"
    r"|(?P<delim>[\s\S])"
)
# After "url(" and white space: an unquoted URL up to ")" (CSS Syntax 3, 4.3.6); anything else in it
# (a quote, "(", a non-printable, white space inside) makes it a bad URL, consumed to ")" or the end.
_URL_REST = re.compile(
    rf"(?P<url>(?:[^\"'()\\ \t\n\x00-\x08\x0b\x0e-\x1f\x7f]++|{_ESC})*+)[ \t\n]*+(?:\)|\Z)"
    r"|(?:[^)\\]++|\\[\s\S]?+)*+\)?+"
)
_WS = re.compile(r"[ \t\n]*+")
_UNESC = re.compile(_ESC)
_CONTINUATION = re.compile(r"\\\n")  # an escaped newline in a string: the string goes on
_PUNCT = {
    ":": COLON,
    ";": SEMI,
    ",": COMMA,
    "(": OPEN,
    "[": OPEN,
    "{": OPEN,
    ")": CLOSE,
    "]": CLOSE,
    "}": CLOSE,
}
_PAIR = {"(": ")", "[": "]", "{": "}"}


@dataclass(slots=True)
class Token:
    kind: int
    text: str  # as written
    value: str = ""  # decoded: a name (lowercase for IDENT/FUNCTION/AT), a string's or URL's content, a unit
    number: float = 0.0
    end: int = -1  # OPEN and FUNCTION: the index of the matching CLOSE (or len(tokens): closed by the end)
    eof: bool = False  # a string, URL or comment the end of the input closed


def _unescape_one(m: re.Match[str]) -> str:
    esc = m.group(0)[1:]
    if not esc:
        return "\ufffd"
    if esc[0] in "0123456789abcdefABCDEF":
        code = int(esc.rstrip(" \t\n"), 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
    return esc


def unescape(text: str) -> str:
    """CSS escapes decoded (CSS Syntax 3, 4.3.7)."""
    return _UNESC.sub(_unescape_one, text) if "\\" in text else text


def _string(text: str) -> str:
    body = text[1:-1] if len(text) > 1 and text[-1] == text[0] else text[1:]
    if "\\" not in body:
        return body
    if (len(body) - len(body.rstrip("\\"))) % 2:
        body = body[:-1]  # a "\\" the end of the input follows: nothing (CSS Syntax 3, 4.3.5)
    return unescape(_CONTINUATION.sub("", body))


def preprocess(css: str) -> str:
    """CSS Syntax 3, 3.3: CR LF, CR and FF read as LF; NUL and surrogates as U+FFFD."""
    if "\r" in css:
        css = css.replace("\r\n", "\n").replace("\r", "\n")
    if "\f" in css:
        css = css.replace("\f", "\n")
    if "\x00" in css:
        css = css.replace("\x00", "\ufffd")
    return css


def tokenize(css: str, comments: bool = False) -> list[Token]:
    """The tokens of ``css`` with their blocks matched (``Token.end``); comments left out unless
    ``comments``."""
    css = preprocess(css)
    out: list[Token] = []
    pos, n = 0, len(css)
    match = _TOKEN.match
    while pos < n:
        m = match(css, pos)
        assert m is not None  # the last alternative matches any character
        pos = m.end()
        tok = _token(m)
        if tok.kind == FUNCTION and tok.value == "url":
            ws = _WS.match(css, pos)
            assert ws is not None
            if ws.end() >= n or css[ws.end()] not in "\"'":
                rest = _URL_REST.match(css, ws.end())
                assert rest is not None
                pos = rest.end()
                url = rest.group("url")
                raw = css[m.start() : pos]
                if url is None:
                    tok = Token(BAD_URL, raw)
                else:
                    tok = Token(URL, raw, unescape(url), eof=not raw.endswith(")") or raw.endswith("\\)"))
        if tok.kind != COMMENT or comments:
            out.append(tok)
        elif out and out[-1].kind != WS:
            # A comment separates the tokens around it: written out as an empty one, so that "a/**/b"
            # does not become the one name "ab", nor "//**/*" the start of a comment.
            out.append(Token(WS, "/**/"))
    _match_blocks(out)
    return out


def _token(m: re.Match[str]) -> Token:
    text = m.group(0)
    kind = m.lastgroup
    if kind == "ws":
        return Token(WS, text)
    if kind == "punct":
        return Token(_PUNCT[text], text, text)
    if kind == "ident":
        return Token(IDENT, text, unescape(text).lower())
    if kind == "fn":
        return Token(FUNCTION, text, unescape(text[:-1]).lower())
    if kind == "delim":
        return Token(DELIM, text, text)
    if kind == "comment":
        return Token(COMMENT, text, eof=m.group("cmtend") is None)
    if m.group("str") is not None:
        if m.group("bad1") is not None or m.group("bad2") is not None:
            return Token(BAD_STRING, text)
        closed = m.group("q1") is not None or m.group("q2") is not None
        return Token(STRING, text, _string(text), eof=not closed)
    if (num := m.group("num")) is not None:
        value = float(num)
        if m.group("pct"):
            return Token(PERCENT, text, "%", value)
        if (unit := m.group("unit")) is not None:
            return Token(DIMENSION, text, unescape(unit).lower(), value)
        return Token(NUMBER, text, "", value)
    if kind == "cdc":
        return Token(CDC, text)
    if kind == "at":
        return Token(AT, text, unescape(text[1:]).lower())
    if kind == "hash":
        return Token(HASH, text, unescape(text[1:]))
    return Token(CDO, text)


def _match_blocks(tokens: list[Token]) -> None:
    stack: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.kind == OPEN or tok.kind == FUNCTION:
            stack.append((i, _PAIR.get(tok.text, ")")))
        elif tok.kind == CLOSE and stack and stack[-1][1] == tok.text:
            tokens[stack.pop()[0]].end = i
    for i, _ in stack:
        tokens[i].end = len(tokens)


def text(tokens: list[Token], start: int = 0, stop: int | None = None) -> str:
    """The tokens ``start:stop`` as written."""
    return "".join(t.text for t in tokens[start:stop])


def skip(tokens: list[Token], i: int) -> int:
    """The index after the component value at ``i`` (a whole block for an opener)."""
    tok = tokens[i]
    if tok.kind == OPEN or tok.kind == FUNCTION:
        return tok.end + 1
    return i + 1
