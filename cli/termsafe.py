"""What the CLI writes to a terminal never carries control characters from mail.

A held mail's body, subject or sender can hold ESC/CSI/OSC sequences, BEL, CR or backspaces (which
clear or rewrite the operator's screen, retitle the window, or hide a line) and Unicode bidirectional
overrides (which show text in an order other than its own: "Trojan Source", CVE-2021-42574). The CLI
writes through :class:`SafeStream`, so every output path, tables, JSON and free text alike, drops
C0 controls other than tab and newline, DEL, the C1 range (U+0080-U+009F, including the 8-bit CSI
U+009B) and the bidi embedding, override and isolate marks. ``--raw`` writes bytes on purpose.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

# Unicode TR9 explicit formatting characters (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI) and the
# implicit marks (LRM, RLM, ALM): https://www.unicode.org/reports/tr9/#Directional_Formatting_Characters
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    return _UNSAFE.sub("", text)


class SafeStream:
    """A text stream that writes ``clean(text)`` to the stream it wraps (everything else is the wrapped
    one's)."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(clean(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
