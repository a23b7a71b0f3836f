"""The parsing caps (docs/security.md#parsing-caps), as cases a test asserts and ``make bench`` measures
(bench/mail_caps.py).

Each case is a mail built by tests/support/mailgen, the outcome inbound-handler must give it, and
for a quarantine the reason it must name. "just under" cases are the most a sender can make the
parser do without hitting a cap; "over" cases must be refused before anything parses them.
Time and peak RSS are measured on the function's runtime process under the real RIE (Linux: the
VmHWM of /proc/<pid>/status, reset through /proc/<pid>/clear_refs before each invocation).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.mail import limits
from tests.support import mailgen as g


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    build: Callable[[], bytes]
    status: str  # inbound-handler's result status
    reason: str = ""  # a substring of the quarantine reason
    parsed: bool = False  # the quarantine comes from reading the parsed mail, not from a cap on the raw bytes
    minimal: bool = False  # forwarded as a minimal parse (the parser gave up; the original attached whole)
    peak_mb: int = 256  # the runtime's peak RSS must stay below this (and the function's memory)


CASES: tuple[Case, ...] = (
    Case("6,000 encoded words in Subject (126 KB)", lambda: g.encoded_words(6000), "quarantined", "subject"),
    Case(
        "300 encoded words in a 4 KB Subject",
        lambda: g.encoded_words(300, word="=?utf-8?q?a?="),
        "quarantined",
        "300 encoded words in subject",
    ),
    Case(
        f"{limits.MAX_ENCODED_WORDS} encoded words in Subject (just under)",
        lambda: g.encoded_words(limits.MAX_ENCODED_WORDS),
        "forwarded",
    ),
    Case(
        "Subject broken over 400 unfolded lines of encoded words (the screen reads the mended field)",
        lambda: g.stray_encoded_words(400),
        "quarantined",
        "400 encoded words in subject",
    ),
    Case("48 KB From of nested comments", lambda: g.comments(1000, 24), "quarantined", "comments nested"),
    Case(
        f"From with comments {limits.MAX_COMMENT_DEPTH} deep, 48 KB (just under)",
        lambda: g.comments(limits.MAX_COMMENT_DEPTH, 48 * 1024 // (2 * limits.MAX_COMMENT_DEPTH + 1)),
        "forwarded",
    ),
    Case("40,000 header fields", lambda: g.many_headers(40_000), "quarantined", "header"),
    Case(
        f"{limits.MAX_HEADER_FIELDS - 10} header fields (just under)",
        lambda: g.many_headers(limits.MAX_HEADER_FIELDS - 10),
        "forwarded",
    ),
    Case("one 1 MB header field", lambda: g.big_header(1024 * 1024), "quarantined", "header block over"),
    Case(
        "header block just under 256 KB (four 60 KB fields)",
        lambda: g.raw([*g.basic(), *((f"X-Big-{i}", "\r\n ".join(["a" * 76] * 760)) for i in range(4))]),
        "forwarded",
    ),
    Case("10,000 tiny parts", lambda: g.many_parts(10_000), "quarantined", "MIME parts"),
    Case(
        f"{limits.MAX_MIME_PARTS - 2} tiny allowed attachments (just under; {limits.MAX_STORED_ATTACHMENTS} "
        "stored)",
        lambda: g.many_parts(limits.MAX_MIME_PARTS - 2, allowed=True),
        "forwarded",
    ),
    Case("multipart nested 1,000 deep", lambda: g.nested(1000), "quarantined", "MIME parts"),
    Case(
        "multipart nested 400 deep (parsed as a minimal mail, the original attached)",
        lambda: g.nested(400),
        "forwarded",
        minimal=True,
    ),
    Case("35 MB attachment", lambda: g.big_attachment(35 * 1024 * 1024 // 4 * 3), "forwarded"),
    # Shapes within every field cap whose parse grew faster than the mail.
    Case(
        "200,000 parts without a Content-Type (2 MB; was 10 s, 94 MB)",
        lambda: g.boundary_only_parts(200_000),
        "quarantined",
        "MIME delimiter lines",
    ),
    Case(
        f"{limits.MAX_DELIMITER_LINES - 100} parts without a Content-Type (just under)",
        lambda: g.boundary_only_parts(limits.MAX_DELIMITER_LINES - 100),
        "forwarded",
    ),
    Case(
        "From: a,a,a,... 32,000 names in one 64 KB field (42 KB was 51 s)",
        lambda: g.from_commas(32_000),
        "quarantined",
        "From header has no usable address",
        parsed=True,
    ),
    Case(
        "multipart/related start= naming no part, 490 text parts with 4 KB Content-IDs (was 185 s)",
        lambda: g.related_start(490, 4096),
        "forwarded",
    ),
    Case(
        "10 MB ISO-2022-JP body as Outlook writes it, 14 of each 37 characters NEC's (was a Python loop, 3.5 "
        "s)",
        lambda: g.windows_jis(130_000),
        "forwarded",
    ),
    Case(
        "45 early-closed multiparts around 11.7 MB of text (was 55 s, 200 MB; now a minimal mail)",
        lambda: g.early_closed(45, 11_700_000),
        "forwarded",
        minimal=True,
    ),
    # A 38 MB body is held three times while the MIME parser reads it (the raw bytes, the parser's
    # text, the decoded body: 110 MB over the runtime's baseline, which earlier cases leave at up to
    # 150 MB), so this case gets the function's 512 MB less a quarter, not half of it.
    Case(
        "38 MB HTML-only mail of <b>x</b> (was 76 s, 460 MB: the HTML converted five times, unbounded)",
        lambda: g.bold_html(38_000_000),
        "forwarded",
        peak_mb=384,
    ),
    # The worst HTML shapes for the text conversion and the forward's sanitiser (nested blockquotes
    # took 11.9 s of CPU and 377 MB before both were capped).
    *(
        Case(
            f"38 MB HTML-only mail of {what}",
            functools.partial(g.html_only, unit, 38_000_000),
            "forwarded",
            peak_mb=384,
        )
        for what, unit in (
            ("nested <blockquote> (was 11.9 s of CPU, 377 MB)", b"<blockquote>"),
            ("nested <div>x", b"<div>x"),
            (
                "<img> tags with attributes (every one examined for trackers)",
                b'<img src="https://a.example/p.jpg" width=600 style="width:600px">',
            ),
        )
    ),
    Case(
        "1.9 MB HTML-only mail of tiny remote images (all read and removed: 31,000 trackers)",
        lambda: g.html_only(b'<img src="https://a.example/p.gif" width=1 height=1>', 1_900_000),
        "forwarded",
    ),
)

# Lambda gives a function CPU in proportion to its memory, one full vCPU at 1,769 MB
# (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html): at 512 MB a second of
# host CPU is about 3.5 s there. A case must finish within the function's timeout with this margin.
LAMBDA_FULL_VCPU_MB = 1769
TIMEOUT_MARGIN = 1.5


def lambda_seconds(cpu_seconds: float, memory_mb: int) -> float:
    """Host CPU seconds as Lambda's CPU share at ``memory_mb`` would stretch them (single-threaded)."""
    return cpu_seconds * LAMBDA_FULL_VCPU_MB / memory_mb


# --- measuring a function's runtime process ------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def runtime_pid(root: int) -> int:
    """The Python runtime (``python -m awslambdaric``) under an RIE process tree."""
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"awslambdaric" in cmdline and b"aws-lambda-rie" not in cmdline:
            return pid
        stack.extend(_children(pid))
    raise LookupError(f"no awslambdaric process under pid {root}")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise LookupError("VmHWM missing")


def reset_peak(pid: int) -> None:
    """Linux >= 4.0: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far (/proc/<pid>/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Measured:
    result: Any
    seconds: float
    peak_mb: float
    baseline_mb: float
    cpu_seconds: float = 0.0  # the runtime process's CPU time for the invocation: steadier than wall time


def measure(rie: Any, event: Any, timeout: float = 120.0) -> Measured:
    """Invoke ``rie`` (a local.rie.RieProcess) once: its result, wall time and peak RSS."""
    pid = runtime_pid(rie.proc.pid)
    reset_peak(pid)
    baseline = peak_rss_mb(pid)
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    result = rie.invoke(event, timeout=timeout)
    seconds = time.perf_counter() - started
    return Measured(result, seconds, peak_rss_mb(pid), baseline, cpu_seconds(pid) - cpu)


def can_measure() -> bool:
    return os.path.exists("/proc/self/clear_refs") and os.path.exists("/proc/self/status")
