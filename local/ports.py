"""The local modes' endpoints (CONTRACT.md "Command line"): each function's RIE port, the SMTP ingress.
The emulator's port is the CLI's default endpoint (cli/command.py), its fresh-account switch is in
deploy/emulator.py (the deploy's preflight reads it)."""

from __future__ import annotations

from deploy.functions import FUNCTIONS

SMTP_PORT = 2525
FIRST_FUNCTION_PORT = 9001
# RIE endpoint of each function in both local modes (127.0.0.1:port), in the order of the function list.
PORTS: dict[str, int] = {f.name: FIRST_FUNCTION_PORT + i for i, f in enumerate(FUNCTIONS)}
