"""attachment-extractor logic: stored attachments to text."""

from __future__ import annotations

from typing import Any

from common import events
from common.config import Config
from common.log import get_logger

log = get_logger("attachment-extractor")


def handle(event: Any, context: Any, cfg: Config) -> dict[str, Any]:
    objects = events.s3_objects(event)
    for obj in objects:
        log.info("attachment noticed", extra={"key": obj.key, "size": obj.size})
    return {"status": "noticed", "keys": [o.key for o in objects]}
