"""The SMTP ingress's line ends: bare LF becomes CRLF (Postfix's smtpd_forbid_bare_newline = normalize),
and only <CR><LF>.<CR><LF> can end DATA."""

from __future__ import annotations

import pytest

from local.ingress import BareLfNormalizer


def fed(data: bytes, *cuts: int) -> bytes:
    """``data`` through one normalizer, in chunks cut at ``cuts``."""
    normalizer, out, last = BareLfNormalizer(), b"", 0
    for cut in (*cuts, len(data)):
        out += normalizer.feed(data[last:cut])
        last = cut
    return out


@pytest.mark.parametrize(
    "wire,expected",
    [
        (b"a\nb\n", b"a\r\nb\r\n"),
        (b"a\r\nb\r\n", b"a\r\nb\r\n"),  # CRLF passes unchanged
        (b"a\nb\r\n.\r\n", b"a\r\nb\r\n.\r\n"),  # the real end of DATA stays
        (b"a\n.\nMAIL FROM:<x@y>\r\n", b"a\r\n..\r\nMAIL FROM:<x@y>\r\n"),  # <LF>.<LF> is content
        (b"a\r\n.\nb\r\n", b"a\r\n..\r\nb\r\n"),  # <CR><LF>.<LF> too
        (b"a\n.\r\nb\r\n", b"a\r\n..\r\nb\r\n"),  # and <LF>.<CR><LF>
        (b"..x\n.y\n", b"..x\r\n.y\r\n"),  # other dot lines keep their stuffing
        (b"a\rb\n", b"a\rb\r\n"),  # a lone CR is not a line end
        (b"x.\n.\r\n", b"x.\r\n..\r\n"),
    ],
)
def test_line_ends(wire: bytes, expected: bytes) -> None:
    assert fed(wire) == expected
    for cut in range(1, len(wire)):  # wherever the network splits the stream
        assert fed(wire, cut) == expected, cut


def test_every_split_of_a_message_gives_the_same_bytes() -> None:
    wire = b"Subject: x\n\nline one\n.\n..stuffed\nlast\r\n\r\n.\r\n"
    whole = fed(wire)
    assert whole == b"Subject: x\r\n\r\nline one\r\n..\r\n..stuffed\r\nlast\r\n\r\n.\r\n"
    for a in range(1, len(wire)):
        for b in range(a, len(wire)):
            assert fed(wire, a, b) == whole, (a, b)
