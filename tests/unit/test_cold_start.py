"""What a function's cold start imports: the modules only some events need stay out of ``import app``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _imported_by(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_a_sender_imports_the_attachment_store_and_mail_parser_only_for_an_attachment() -> None:
    """About 50 ms of a sender's `import app` (docs/development.md): acks and most replies carry none."""
    loaded = _imported_by("common.senders.handler")
    assert "common.senders.handler" in loaded
    assert not {"common.store.attachments", "common.mail.parse"} & loaded
