"""Which Python ``email-handler dev`` runs, and whether it reads mail as the function images do.

The images run Debian trixie's python3.13: the suite and the minor version are pinned
(scripts/os-image.sh), the Debian revision is whatever the mirrors offered at the build, recorded in
the images' ``org.service-email-handler.python`` label. Dev runs the functions on the host's Python
instead, so a host Python whose standard library reads mail differently would make the same mail
behave differently locally. HTML is parsed by lexbor (common.mail.htmldoc), not the stdlib's
html.parser, for exactly that reason; what is left is checked here by behaviour, not by version
number, so a vendor's backport counts as the fix it is.
"""

from __future__ import annotations

import inspect
import platform
import sys
from email.utils import getaddresses

IMAGE_PYTHON = "3.13"  # the minor version scripts/os-image.sh pins (PYTHON_MINOR)
INSTALL = (
    f"install Python {IMAGE_PYTHON} (the images run Debian trixie's python{IMAGE_PYTHON}; 3.12.6 or later "
    "also reads mail the same) and run `make venv`"
)


def describe() -> str:
    return f"Python {platform.python_version()} ({sys.executable})"


def differences() -> list[str]:
    """How this Python reads mail differently from the images' ('' when it does not)."""
    found = []
    # CVE-2023-27043 (gh-102988): getaddresses/parseaddr got a strict parser that refuses ambiguous
    # addresses such as 'alice@example.org)<bob@example.org>'; before it, they returned one of the
    # candidate addresses. https://docs.python.org/3/library/email.utils.html#email.utils.getaddresses
    # ("Changed in version 3.13: strict"; backported to 3.12.6). Ingress and the outbox route by it.
    if "strict" not in inspect.signature(getaddresses).parameters:
        found.append(
            "email.utils.getaddresses lacks the strict parsing of CVE-2023-27043 (ambiguous recipients "
            "route differently)"
        )
    return found
