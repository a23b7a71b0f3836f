"""The saved deployment: what a deploy was given, so that a new shell needs nothing exported.

A deploy (not a dry run) writes ``.email-handler/<env>.json`` at the project's root, beside ``.build/``:
every configuration variable it was given (``DOMAIN_NAME``, ``PUBLIC_EMAIL``, ``PUBLIC_ADDRESSES``,
``PRIVATE_EMAIL``, the bucket, the Region, the ack texts, the limits ...) except the secrets, which
live in SSM only. Every command that acts on a deployment (deploy, status, ses, replay, destroy) reads
it through :func:`merged`: a variable exported in the shell wins over the saved one, and ``--region``
or an exported ``AWS_REGION`` wins over the saved Region.

Not under ``.build/``, which ``make clean`` removes: losing these settings would make the next deploy
change the stack to whatever the shell then holds. Ignored by git (``.gitignore``): the file names the
owner's private mailbox and the account's bucket, which a public fork must not publish.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from deploy.config import Config, env_name
from deploy.errors import DeployError

DIR = Path(__file__).resolve().parents[1] / ".email-handler"
VERSION = 1
# Held in SSM by the deploy (a secret setting of common.runtime.config), never written to a file.
SECRETS = frozenset({"THREAD_SECRET"})
# Derived by every command from its own credentials or flags, never a setting to carry over.
_NOT_SAVED = frozenset({"ENVIRONMENT", "ACCOUNT_ID", "AWS_REGION", "AWS_DEFAULT_REGION"})
REGION_KEYS = ("AWS_REGION", "AWS_DEFAULT_REGION")


def variables() -> frozenset[str]:
    """The configuration's variable names (common/runtime/config.py) and LOG_LEVEL, which the deploy
    also passes on."""
    names = {env_name(f.name) for f in fields(Config) if not f.name.startswith("_")}
    return frozenset((names | {"LOG_LEVEL"}) - SECRETS - _NOT_SAVED)


def path(env: str, folder: Path | None = None) -> Path:
    return (folder or DIR) / f"{env}.json"


def load(env: str, folder: Path | None = None) -> dict[str, str]:
    """The saved settings of ``env`` as variables (``AWS_REGION`` among them), or {} when none."""
    file = path(env, folder)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DeployError(
            f"the saved deployment {file} cannot be read ({exc})",
            f"fix or delete {file}, export the settings and deploy again",
        ) from None
    settings = {str(k): str(v) for k, v in dict(data.get("settings") or {}).items() if k not in SECRETS}
    if data.get("region"):
        settings["AWS_REGION"] = str(data["region"])
    return settings


def merged(env: str, environ: Mapping[str, str], cli_region: str | None = None) -> dict[str, str]:
    """``environ`` over the saved settings of ``env``: what is exported wins. The saved Region applies
    only when neither ``--region`` nor ``AWS_REGION`` says another."""
    saved = load(env)
    out = dict(environ)
    for key, value in saved.items():
        if key in REGION_KEYS:
            if not cli_region and not any(environ.get(k) for k in REGION_KEYS):
                out[key] = value
        elif not environ.get(key):
            out[key] = value
    return out


def save(cfg: Config, environ: Mapping[str, str], folder: Path | None = None) -> Path:
    """Write what the deploy of ``cfg`` was given (``environ``, already merged); never a secret."""
    wanted = variables()
    settings = {k: v for k, v in sorted(environ.items()) if k in wanted and v}
    # EMAIL_BUCKET only when it was given: its default names the account, and credentials of another
    # account must find their own default, not be refused this one's bucket.
    file = path(cfg.env, folder)
    file.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(
        {
            "about": "written by email-handler deploy; read by deploy, status, ses, replay and destroy. "
            "Exported variables win. Secrets are never here (THREAD_SECRET is in SSM).",
            "version": VERSION,
            "env": cfg.env,
            "region": cfg.region,
            "bucket": cfg.bucket,
            "settings": settings,
        },
        indent=2,
    )
    tmp = file.with_suffix(".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, file)  # a reader never sees half a file
    return file
