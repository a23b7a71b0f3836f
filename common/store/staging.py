"""Raw mail as SES's receipt rule stored it (``staging/<sesMessageId>``), until a handler is done.

Staging is deleted last, so a missing object means the delivery was already handled (SES and
Lambda deliver at least once).
"""

from __future__ import annotations

from common.aws import s3
from common.runtime.config import Config
from common.store import layout


def fetch(cfg: Config, mid: str) -> bytes | None:
    obj = s3.get(cfg.bucket, layout.staging(mid))
    return None if obj is None else bytes(obj["Body"].read())


def done(cfg: Config, mid: str) -> None:
    s3.delete(cfg.bucket, layout.staging(mid))
