"""The local AWS emulator's fresh-account switch and the token it asks for: the deploy's preflight reads
the switch (a deploy to the emulator on the fresh-account model), local/ serves it. Its port is the
CLI's default endpoint (cli/command.py)."""

from __future__ import annotations

import hashlib
import hmac

# The emulator's switch of the fresh-account model (local/fresh.py): GET says which account it models.
EMULATOR_ACCOUNT_PATH = "/moto-api/service-email-handler/account"


def emulator_token(secret_key: str) -> str:
    """The bearer token the local emulator asks of ``/moto-api/*`` (local/guard.py), derived from
    the local admin's secret key, so a host tool holding the admin's credentials can compute it."""

    return hmac.new(secret_key.encode(), b"service-email-handler moto-api", hashlib.sha256).hexdigest()
