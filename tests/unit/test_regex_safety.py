"""Every regular expression in common/ and the host packages (cli/, local/, ops/) runs in linear
time on the input shaped to break it.

An AST scan finds each pattern (``re.compile`` / ``search`` / ``sub`` / ``subn`` / ``match`` /
``fullmatch`` / ``findall`` / ``finditer`` / ``split`` calls); each must have a case in ``CASES``,
keyed by module and by the name it is assigned to (module-level patterns) or by its function and
its source text (inline calls), so a new or changed pattern fails here until someone writes down
the input that would make it backtrack. Each case times the pattern, the way the code calls it, on
its pathological input at n and 4n repetitions (CPU time, best of three when the first look is
suspicious, in a forked child that is killed after 30 s): linear work grows about 4x, quadratic 16x.
The owner's spam patterns are not Python's: they run on RE2 (tests/unit/test_policy_rules.py).
"""

from __future__ import annotations

import ast
import importlib
import multiprocessing
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_CALLS = frozenset({"compile", "search", "sub", "subn", "match", "fullmatch", "findall", "finditer", "split"})


@dataclass(frozen=True)
class Found:
    module: str
    key: str
    line: int
    call: str  # the re function
    pattern: str  # the pattern argument's source
    flags: str  # the flags argument's source ('' if none)


def _scan() -> list[Found]:
    found: list[Found] = []
    # what ships, and the host code that reads untrusted input (the emulator, the SMTP ingress, the CLI)
    for path in sorted(p for root in ("common", "cli", "local", "ops") for p in (ROOT / root).rglob("*.py")):
        source = path.read_text()
        tree = ast.parse(source)
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in _CALLS
                and node.args
            ):
                continue
            scope: list[str] = []
            assigned = ""
            at: ast.AST = node
            while at in parents:
                at = parents[at]
                if isinstance(at, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    scope.append(at.name)
                if not assigned and isinstance(at, ast.Assign) and isinstance(at.targets[0], ast.Name):
                    assigned = at.targets[0].id
            pattern = ast.get_source_segment(source, node.args[0]) or ""
            flags = node.args[1] if node.func.attr == "compile" and len(node.args) > 1 else None
            flags = flags or next((k.value for k in node.keywords if k.arg == "flags"), None)
            if node.func.attr in ("search", "match", "fullmatch", "findall", "finditer", "split"):
                flags = flags or (node.args[2] if len(node.args) > 2 else None)
            if node.func.attr in ("sub", "subn"):
                flags = flags or (node.args[4] if len(node.args) > 4 else None)
            flag_src = ast.get_source_segment(source, flags) or "" if flags is not None else ""
            key = assigned if not scope and assigned else f"{'.'.join(reversed(scope))}:{pattern}"
            found.append(Found(module, key, node.lineno, node.func.attr, pattern, flag_src))
    return found


@dataclass(frozen=True)
class Case:
    """How to attack one pattern: ``units`` each repeated n times between ``head`` and ``tail``.
    ``how``: scan (finditer: the work of search, sub, findall and split), match, fullmatch, or
    ``run`` (a callable taking the input, for a pattern used by a loop of its own).
    ``env``: values for the names an inline pattern is built from. ``cap``: the caller cuts the
    input to this many characters before the pattern sees it (measured at the cap instead)."""

    units: tuple[str | bytes, ...]
    head: str | bytes = ""
    tail: str | bytes = ""
    how: str = "scan"
    env: dict[str, Any] = field(default_factory=dict)
    run: Callable[[Any], object] | None = None
    patterns: Callable[[], Iterable[re.Pattern[Any]]] | None = None
    cap: int = 0
    n: int = 50_000


def case(*units: str | bytes, **kw: Any) -> Case:
    return Case(units, **kw)


def _css_tokenize(css: str) -> object:
    from common.mail import csstoken

    return len(csstoken.tokenize(css))


def _scrub_addresses() -> Iterable[re.Pattern[str]]:
    from common.reply import scrub

    return (scrub._pattern(("owner@example.net", "first.last@gmail.com")),)


def _scrub_names() -> Iterable[re.Pattern[str]]:
    from common.reply import scrub

    return (scrub._names_pattern(("Owner Name", "Owner")),)


CASES: dict[tuple[str, str], Case] = {
    # --- delivery ---
    ("common.delivery.ack", "_NOREPLY"): case("no-", "do-not-"),
    ("common.delivery.ack", "_ROLE"): case("a", "-", head="mailer-daemon-", how="match"),
    ("common.delivery.ack", "_LOCAL"): case("a.", "a", tail="@", how="fullmatch"),
    ("common.delivery.ack", "_LABEL"): case("a-", "-"),
    ("common.delivery.compose", '_partial_note:r"number\\s*=\\s*\\"?(\\d+)"'): case(
        "number ", "number=", " "
    ),
    ("common.delivery.compose", '_partial_note:r"total\\s*=\\s*\\"?(\\d+)"'): case("total ", "total=", " "),
    # --- extractor: pypdf's messages about a stranger's PDF ---
    ("common.extractor.errors", "_ADDRESS"): case(" ", " at 0", " at "),
    ("common.extractor.errors", "_INDIRECT"): case("IndirectObject(1, 2, ", "IndirectObject("),
    ("common.extractor.errors", "_HEX"): case("0x0", "0x"),
    # --- local tools (the developer's own input; cheap to keep linear anyway) ---
    (
        "local.emulator",
        'sqs_message_characters:"[^\\t\\n\\r\\x20-\\ud7ff\\ue000-\\ufffd\\U00010000-\\U0010ffff]"',
    ): case("a"),
    ("local.fresh", "LOCAL_REGISTRY"): case("1", ":", head="localhost:", how="match"),
    ("local.fresh", "_RECORD"): case("1 ", "IN ", " ", head="a ", how="match", n=5_000, cap=4096),
    ("local.fresh", 'policy_size:r"\\s"'): case(" ", "a"),
    ("local.fresh", 'parse_zone:r\'"([^"]*)"\''): case('"a', '"'),
    ("cli.termsafe", "_UNSAFE"): case("\x00", "a"),
    # --- mail: reports by structure (common/mail/reports.py) ---
    ("common.mail.reports", "_BOUNCE_SUBJECT"): case("undeliver", "delivery ", " "),
    ("common.mail.reports", "_BOUNCE_BODY"): case(
        "this message was created automatically by mail ", "delivery to the "
    ),
    ("common.mail.reports", "_ROLE_SENDER"): case("a", "-", ".", head="mailer-daemon-", how="match"),
    ("common.mail.reports", "_MAILER_DAEMON"): case("mailer-", "mailer", "a", how="fullmatch"),
    ("common.mail.reports", "_ROLE_NAME"): case("mail delivery ", " ", how="match"),
    ("common.mail.reports", "_NOREPLY"): case("no-", "do-not-", "do-"),
    ("common.mail.reports", "_LIST_ADMIN"): case("a-", "-", "owner-", how="match", cap=64),
    ("common.mail.reports", "_SMTP"): case(
        "550 5.1", "550 - ", "\n   ", "\nstatus: 5.1.1 ", "[#4.1", "diagnostic-code ", "5"
    ),
    ("common.mail.reports", "_FIELD_LINE"): case(" ", ">", "a", head=" ", how="match"),
    ("common.mail.reports", "_CONTINUATION"): case(" ", ">", " >", how="match"),
    ("common.mail.reports", "_ADDRESS"): case("a", "a.", "a@", "@a"),
    ("common.mail.reports", "_CORRELATION"): case(" ", "\t", head=" ", how="match"),
    ("common.mail.sanitize", "_NAME_CONTROL"): case("\x00", "a"),
    ("common.mail.sanitize", "_PATH"): case("/", "a"),
    # --- mail ---
    ("common.mail.build", "_CID_URL"): case("cid:", "cid:a"),
    ("common.mail.build", "_CONTENT_ID"): case("a", "@"),
    ("common.mail.charsets", "_SURROGATE"): case("a"),
    ("common.mail.filetypes", 'default_extension:r"[^a-z0-9.+-]"'): case("A", "a"),
    ("common.mail.headers", "_FOLD"): case("\r", "\r\n", "\n "),
    ("common.mail.headers", "ENCODED_WORD"): case("=?a?q?", "=?a?", "=?"),
    ("common.mail.headers", "_Q_ESCAPE"): case(b"=A", b"="),
    ("common.mail.headers", "_ATEXT"): case("a", "a@"),
    ("common.mail.headers", "_LABEL"): case("a-", "-"),
    ("common.mail.headers", '_word_bytes:r"[^A-Za-z0-9+/]"'): case("!", "a"),
    ("common.mail.headers", '_read_name_addr:r"\\s+"'): case(" ", " a"),
    ("common.mail.htmltext", "_QUOTE_MARK"): case("gmail_", "moz-", "yahoo"),
    ("common.mail.htmltext", "_SPACE"): case(" ", "\u00a0a"),
    ("common.mail.htmltext", '_text:r"\\n{3,}"'): case("\n\n", "\n"),
    ("common.mail.limits", "_BLANK_LINE"): case(b"\r", b"\r\n", b"\n"),
    ("common.mail.limits", "_LINE_ENDS"): case(b"\r", b"\r\n"),
    ("common.mail.limits", "_FIELD"): case(b"a", b"\naaaaaaaa", b"a:\n ", b"\n \n"),
    ("common.mail.limits", "_FIELD_START"): case(b"\na", b"\n"),
    ("common.mail.limits", "_ENCODED_WORD_START"): case(b"=?", b"="),
    ("common.mail.limits", "_PARENS"): case(b"(", b"a"),
    ("common.mail.limits", "_HEADER_LINE"): case(b"a", b"\r"),
    ("common.mail.limits", "_KNOWN_FIELD"): case(b"x-", b"content-", b"a", how="match"),
    ("common.mail.limits", "_MAYBE_STRAY"): case(b"\na", b"\r", b"\nx-", b"\n--", b"a"),
    ("common.mail.limits", "_FIELD_NAME"): case(b"a", b"!", how="match"),
    ("common.mail.limits", "_CONTENT_TYPES"): case(b"\ncontent-type ", b"\rContent-Type", b"\n"),
    ("common.mail.parse", "_NOREPLY"): case("no-", "-", head="noreply", how="match"),
    ("common.mail.parse", "_RAW_FIELD"): case(b"a", b"\naaaaaaaa", b"a:\n ", b"\n \n"),
    ("common.mail.parse", "_CTE_FIELD"): case(b"\ncontent-transfer-encoding ", b"\n"),
    ("common.mail.parse", "_BLANK"): case(b"\r\n", b"\r"),
    ("common.mail.parse", "_PLACEHOLDER"): case("\x00seh-body-1", "\x00"),
    ("common.mail.parse", "_FOLDED_BOUNDARY"): case(
        b';boundary="a\n ', b"a\n ", b';boundary="', head=b';boundary="'
    ),
    ("common.mail.parse", "_BOUNDARY_VALUE"): case(b';boundary="', b" boundary=", b"\\a"),
    ("common.mail.parse", "_TRAILING_TEXT"): case(b"\n--a", b"\n--", b"\n--a--"),
    ("common.mail.parse", "_MIME_LINE"): case("\ncontent-type", "\ncontent-"),
    ("common.mail.parse", "_DELIMITER"): case("\n--a \n", "\n--a", "\n--"),
    ("common.mail.parse", "_TYPE"): case(" ", "a/", how="match"),
    (
        "common.mail.parse",
        'mend_boundaries:rb"(?m)^(--(?:" + names + rb")(?:--)?)[ \\t]+[^\\s][^\\r\\n]*"',
    ): case(b"\n--b ", b"\n--b", env={"names": b"b|bb"}),
    ("common.mail.parse", '_reparse:r"(?m)^--" + re.escape(boundary)'): case(
        "\n--", "\n--b", env={"boundary": "bb"}
    ),
    ("common.mail.parse", 'parse_params:r"\\([^()]*\\)"'): case("(", "(a"),
    ("common.mail.parse", '_b64:rb"[^A-Za-z0-9+/]"'): case(b"!", b"a"),
    ("common.mail.parse", 'parse_params:r"\\\\(.)"'): case("\\", "a"),
    ("common.mail.parse", 'parse_params:r"([^*]+)\\*(?:(\\d{1,3})\\*?|)"'): case("a", "*1", how="fullmatch"),
    ("common.mail.parse", 'mend_boundaries:rb"\\r?\\n"'): case(b"\r", b"\r\n"),
    ("common.mail.sanitize", "_CONTROL"): case("\x00", "a"),
    ("common.mail.sanitize", "_BIDI"): case("\u202e", "a"),
    ("common.mail.sanitize", "MESSAGE_ID"): case("<a", "<a@", "a@"),
    ("common.mail.sanitize", 'safe_filename:r"[^\\w .()+,=@-]"'): case("!", "a"),
    ("common.mail.sanitize", 'safe_filename:r"\\s+"'): case(" ", " a"),
    ("common.mail.sanitize", 'clean_header_text:r"\\s+"'): case(" ", " a"),
    ("common.mail.threads", "_READABLE_LOCAL"): case("a.", "a", "."),
    ("common.mail.threads", "_LABEL"): case("a-", "-"),
    ("common.mail.threads", "SAFE_ID"): case("a.", "a", "."),
    ("common.mail.threads", "_BASE32"): case("a", "2", ".", how="fullmatch"),
    ("common.mail.threads", 'slugify:r"[^a-z0-9]+"'): case("!", "a!"),
    ("common.mail.threads", 'readable_id:r"(?=-at-)"'): case("-at", "-"),
    ("common.mail.htmlsafe", "_ATTR_NAME"): case("a", "-", how="fullmatch"),
    ("common.mail.htmlsafe", "_TAG_NAME"): case("a", "-", how="fullmatch"),
    ("common.mail.csstoken", "_TOKEN"): case(
        "/*",
        "/**",
        '"',
        "'",
        '"\\',
        "1",
        "1e",
        "1.",
        "-",
        "--",
        "\\",
        "\\31",
        "a\\",
        "#",
        "@",
        "<!-",
        "-->",
        "url(",
        "u",
        run=_css_tokenize,
    ),
    ("common.mail.csstoken", "_URL_REST"): case(
        "a", " ", "\\", "\\)", "(", '"', head="url(", run=_css_tokenize
    ),
    ("common.mail.csstoken", "_WS"): case(" ", "\n ", head="url(", run=_css_tokenize),
    ("common.mail.csstoken", "_UNESC"): case("\\", "\\1", "\\000000", head="a"),
    ("common.mail.csstoken", "_CONTINUATION"): case("\\", "\\\n"),
    ("common.mail.trackers", "_SCHEME"): case("a", "a+", how="match"),
    ("common.mail.trackers", "_NUMBER"): case(" ", "1", ".", how="match"),
    ("common.mail.trackers", "_MAY_LOAD"): case("a", ")"),
    ("common.mail.trackers", 'unwrap:r"https?://[^\\s\\"\'<>]++$"'): case(
        "a", " ", head="https://", how="match"
    ),
    # --- reply ---
    ("common.reply.auth", "_OTHER_AT"): case("&#0", "&#x0", "%4"),
    ("common.reply.auth", "_WSP_RUN"): case(" ", " a"),
    ("common.reply.auth", 'check_from:r"\\r?\\n(?=[ \\t])"'): case("\r\n", "\r"),
    ("common.reply.auth", "check_from:re.escape(owner)"): case(
        "owner@example.ne", env={"owner": "owner@example.net"}
    ),
    (
        "common.reply.scrub",
        '_pattern:rf"(?:(?<![A-Za-z0-9._+-])|(?<=%[0-9A-Fa-f]{{2}}))(?:{body})(?![A-Za-z0-9-])"',
    ): case("owner@example.ne", "owner%40", "first.last", "%20", patterns=_scrub_addresses),
    (
        "common.reply.scrub",
        '_names_pattern:r"(?<!\\w)[\\"\']?(?:" + "|".join(alternatives) + r")[\\"\']?(?!\\w)"',
    ): case("owner ", "owner", " ", patterns=_scrub_names),
    ("common.reply.handler", 'send_reply:r"\\n{3,}"'): case("\n\n", "\n"),
    ("common.reply.text", "_LABEL"): case("a", " ", "a.", head="  **", how="match"),
    ("common.reply.text", "_DATE"): case("1", "19", "1/1/", "1:", "1-1-"),
    ("common.reply.text", "_ADDRESS"): case("a", "a@", "@", "."),
    ("common.reply.text", "_BRACKETED"): case("<a", "<a@", "<a@b", "a@b.", "<"),
    ("common.reply.text", "_COMMAND"): case(" ", "[a ", head="[", how="match"),
    ("common.reply.text", "_CONTROL"): case(" ", "]", head="[block:", how="match"),
    ("common.reply.text", "_TO"): case(" ", "]", head="[to:", how="match"),
    ("common.reply.text", "_QUOTED"): case(" ", how="match"),
    ("common.reply.text", "_PREFIX"): case(" ", "re: ", "re[1] ", head="re"),
    ("common.reply.text", 'clean_reply:r"\\n{3,}"'): case("\n\n", "\n"),
    # --- configuration (the operator's values, checked at start) ---
    ("common.runtime.addresses", "_LOCAL"): case("a.", "a", "!", tail="..", how="fullmatch"),
    ("common.runtime.addresses", "_FROM"): case("\n", " ", "[from: ", "[from: a ", "\n[from:"),
    ("common.runtime.addresses", "EMAIL"): case("a.", "a@", head="a@", how="match"),
    ("common.runtime.config", "_DOMAIN"): case("a.", "a", how="match"),
    ("common.runtime.config", "_PUBLIC_NAME_FORBIDDEN"): case("a"),
    ("common.runtime.config", "_ENVIRONMENT"): case("a", tail="!", how="fullmatch"),
    ("common.runtime.config", "_ACCOUNT_ID"): case("1", how="fullmatch"),
    ("common.runtime.config", "_EVENT_BUS"): case("a", tail="!", how="fullmatch"),
    ("ops.export", "_FROM_LINE"): case(b">", tail=b"x\n"),
    ("ops.export", "_ENVELOPE"): case("a", tail=" ", how="fullmatch"),
    ("ops.export", "_SEGMENT"): case("a", tail="/", how="fullmatch"),
    ("ops.export", 'mboxrd_unquoted:rb"^>(>*From )"'): case(b">", tail=b"x\n"),
    ("ops.export", 'safe_name:r"[^A-Za-z0-9@._+-]"'): case("a", "!"),
    ("ops.stats", "AGO"): case("1", tail="x", how="fullmatch"),
    ("ops.index", "_CJK"): case("東", "a"),
    ("ops.index", "_QUERY_PART"): case('"a', " a"),
    ("ops.index", "_CONTROL"): case("a", "\x00"),
    ("common.store.senderlists", "_DOMAIN"): case("a.", "a-", how="fullmatch"),
    ("common.store.senderlists", "_LOCAL"): case("a", how="fullmatch"),
}


def _patterns(found: Found, case: Case) -> list[re.Pattern[Any]]:
    if case.patterns is not None:
        return list(case.patterns())
    module = importlib.import_module(found.module)
    if found.key == found.key.split(":", 1)[0] and hasattr(module, found.key):
        value = getattr(module, found.key)
        values = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else [value]
        return [v for v in values if isinstance(v, re.Pattern)]
    names = {**vars(module), "re": re, **case.env}
    pattern = eval(found.pattern, names)
    flags = eval(found.flags, names) if found.flags else 0
    return [re.compile(pattern, flags)]


def _inputs(case: Case, pattern: re.Pattern[Any], n: int) -> list[str | bytes]:
    out: list[str | bytes] = []
    for unit in case.units:
        if isinstance(pattern.pattern, bytes) != isinstance(unit, bytes):
            continue
        head, tail = case.head, case.tail
        if isinstance(unit, bytes):
            head = head if isinstance(head, bytes) else head.encode()
            tail = tail if isinstance(tail, bytes) else tail.encode()
        text = head + unit * n + tail  # type: ignore[operator]
        out.append(text[: case.cap] if case.cap else text)
    assert out, f"no input of the pattern's type for {pattern.pattern!r}"
    return out


def _cost(case: Case, pattern: re.Pattern[Any], text: str | bytes, rounds: int = 1) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        if case.run is not None:
            case.run(text)
        elif case.how == "match":
            pattern.match(text)
        elif case.how == "fullmatch":
            pattern.fullmatch(text)
        else:
            for _m in pattern.finditer(text):
                pass
        best = min(best, time.process_time() - start)
    return best


# A linear pattern does 4x the work at 4n, a quadratic one 16x. The margin absorbs a loaded machine;
# times too small to measure well are compared in absolute terms instead (quadratic work at these
# sizes takes seconds).
MAX_RATIO = 10.0
NOISE_FLOOR_S = 0.02
MAX_CAPPED_S = 0.05


def _measure(found: Found, case: Case) -> list[str]:
    problems = []
    for pattern in _patterns(found, case):
        for unit_n, small in enumerate(_inputs(case, pattern, case.n)):
            if case.cap:
                spent = _cost(case, pattern, small)
                if spent > MAX_CAPPED_S:
                    problems.append(f"unit {unit_n}: {spent:.3f} s on {len(small)} characters")
                continue
            large = _inputs(case, pattern, case.n * 4)[unit_n]
            t1, t4 = _cost(case, pattern, small), _cost(case, pattern, large)
            if t4 > NOISE_FLOOR_S and t4 / max(t1, 1e-6) > MAX_RATIO:  # suspicious: best of three each
                t1, t4 = _cost(case, pattern, small, 3), _cost(case, pattern, large, 3)
            if t4 > NOISE_FLOOR_S and t4 / max(t1, 1e-6) > MAX_RATIO:
                problems.append(f"unit {unit_n} ({case.units[unit_n]!r}): {t1:.4f} s at n, {t4:.4f} s at 4n")
    return problems


def _in_child(found: Found, case: Case, timeout: float = 30.0) -> list[str]:
    """Measure in a forked child: a pattern gone exponential is killed instead of hanging the suite."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=lambda: send.send(_measure(found, case)))
    child.start()
    ready = receive.poll(timeout)
    result: list[str] = receive.recv() if ready else [f"did not finish in {timeout:.0f} s"]
    child.join(5)
    if child.is_alive():
        child.kill()
        child.join()
    return result


FOUND = _scan()


def test_the_scan_finds_the_patterns_it_should() -> None:
    keys = {(f.module, f.key) for f in FOUND}
    assert ("common.mail.limits", "_FIELD") in keys
    assert ("common.reply.text", "_COMMAND") in keys
    assert len(FOUND) > 80


def test_every_pattern_has_a_registered_case() -> None:
    missing = sorted({(f.module, f.key) for f in FOUND} - set(CASES))
    assert not missing, (
        "patterns without a case in CASES (add the input that would make each backtrack):\n"
        + (
            "\n".join(
                f"  ({m!r}, {k!r}),  # line {next(f.line for f in FOUND if (f.module, f.key) == (m, k))}"
                for m, k in missing
            )
        )
    )
    stale = sorted(set(CASES) - {(f.module, f.key) for f in FOUND})
    assert not stale, f"cases for patterns that no longer exist: {stale}"


def test_anchored_cases_are_only_ever_anchored() -> None:
    """A case measured with match/fullmatch is honest only if the code never searches with it."""
    for (module, key), case in CASES.items():
        if case.how == "scan" or ":" in key or case.patterns is not None or case.run is not None:
            continue
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        uses = re.findall(rf"\b{re.escape(key)}\.(\w+)\(", source)
        assert uses and set(uses) <= {"match", "fullmatch"}, f"{module}.{key} is used as {uses}"


@pytest.mark.parametrize("found", FOUND, ids=lambda f: f"{f.module}:{f.line}")
def test_linear_on_its_worst_input(found: Found) -> None:
    case = CASES.get((found.module, found.key))
    if case is None:
        pytest.fail(f"no case for {found.module} {found.key!r} (test_every_pattern_has_a_registered_case)")
    problems = _in_child(found, case)
    assert not problems, f"{found.module}:{found.line} {found.pattern[:80]}: " + "; ".join(problems)
