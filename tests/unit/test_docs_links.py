"""The documentation does not rot: README.md and docs/*.md link to files and headings that exist,
name repository paths and modules that exist, and the code's references to docs/ resolve."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Top-level entries a path in backticks may start with to count as a repository path.
ROOTS = (
    "common/",
    "deploy/",
    "cli/",
    "local/",
    "ops/",
    "scripts/",
    "compose/",
    "images/",
    "tests/",
    "bench/",
    "docker/",
    "requirements/",
    "docs/",
)
TOP_FILES = {"Dockerfile.base", "Makefile", "pyproject.toml", "README.md"}
# Not repository paths although they start like one: the mail bucket's prefix for local invocations.
NOT_REPO_PATHS = {"local/invocations/"}

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
MODULE = re.compile(r"^(common|deploy|cli|local|ops|bench)(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lowercased, everything but letters, marks,
    numbers, connector punctuation, spaces and hyphens removed, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"(\*\*|__|\*)", "", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    kept = "".join(
        c for c in text if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"
    )
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = github_slug(match.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def prose(text: str) -> str:
    """The text without code blocks or code spans (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def code_tokens(text: str) -> list[str]:
    """Every whitespace-separated word inside code: spans and fenced blocks."""
    spans = [m.group(2) for m in INLINE_CODE.finditer(FENCE.sub("", text))]
    spans += [m.group(0) for m in FENCE.finditer(text)]
    return [tok for span in spans for tok in span.split()]


def looks_like_repo_path(token: str) -> bool:
    if token in TOP_FILES:
        return True
    return token.startswith(ROOTS) and not any(c in token for c in "<>{}*…$=:|") and ".." not in token


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def test_github_slug_rules() -> None:
    assert github_slug("Parsing received mail (`common/mail/`)") == "parsing-received-mail-commonmail"
    assert (
        github_slug("The owner's own mail is never lost or blocked")
        == "the-owners-own-mail-is-never-lost-or-blocked"
    )
    assert github_slug("Acks: no backscatter, RFC 3834") == "acks-no-backscatter-rfc-3834"
    assert (
        github_slug("Senders (ack-sender, forward-sender, reply-sender)")
        == "senders-ack-sender-forward-sender-reply-sender"
    )
    assert github_slug("What a send costs") == "what-a-send-costs"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: …
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(
                f"{target}: no file {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}"
            )
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{page_id(page)}: broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_repository_paths_exist(page: Path) -> None:
    missing = []
    for token in code_tokens(page.read_text(encoding="utf-8")):
        token = token.strip("\"'(),;.")
        if looks_like_repo_path(token) and token not in NOT_REPO_PATHS and not (REPO / token).exists():
            missing.append(token)
    assert not missing, f"{page_id(page)} names paths that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_dotted_module_names_exist(page: Path) -> None:
    """`common.mail.build.unbuildable` and the like: the module exists and defines the name."""
    missing = []
    for token in code_tokens(page.read_text(encoding="utf-8")):
        token = token.strip("\"'(),;.")
        if not MODULE.match(token):
            continue
        parts = token.split(".")
        for i in range(len(parts), 0, -1):
            base = REPO.joinpath(*parts[:i])
            module = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
            if module.exists():
                rest = parts[i:]
                if rest and not re.search(
                    rf"^\s*(?:def|class)\s+{rest[0]}\b|^\s*{rest[0]}\s*[:=]",
                    module.read_text(encoding="utf-8"),
                    re.M,
                ):
                    missing.append(f"{token} ({rest[0]} not in {module.relative_to(REPO)})")
                break
        else:
            missing.append(token)
    assert not missing, f"{page_id(page)} names modules that do not exist: {missing}"


def test_the_codes_references_to_docs_resolve() -> None:
    """Comments and messages in the code cite docs/…md: those pages exist."""
    cited: dict[str, Path] = {}
    for source in [
        *REPO.glob("common/**/*.py"),
        *REPO.glob("deploy/*.py"),
        *REPO.glob("cli/*.py"),
        *REPO.glob("local/*.py"),
        *REPO.glob("ops/*.py"),
        *REPO.glob("images/*/app.py"),
        *REPO.glob("bench/*.py"),
        *REPO.glob("scripts/*"),
        *REPO.glob("tests/**/*.py"),
    ]:
        for name in re.findall(r"\bdocs/[\w.-]+\.md\b", source.read_text(encoding="utf-8", errors="replace")):
            cited.setdefault(name, source.relative_to(REPO))
    assert "docs/CONTRACT.md" in cited
    missing = {name: str(where) for name, where in cited.items() if not (REPO / name).exists()}
    assert not missing, f"the code cites missing pages: {missing}"


def test_every_docs_page_links_back_and_is_indexed() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        text = page.read_text(encoding="utf-8")
        assert f"](docs/{page.name})" in readme, f"README's documentation index lacks docs/{page.name}"
        if page.name != "CONTRACT.md":  # a copy of the shared contract, kept as it is
            assert "](../README.md)" in "\n".join(text.splitlines()[:4]), (
                f"{page.name} does not start with a link back"
            )
