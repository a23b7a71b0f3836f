"""inbound-handler's EventBridge tasks: the daily quarantine digest and an operator's release.

The digest comes from a schedule (an EventBridge rule or EventBridge Scheduler); a release from
``email-handler quarantine release``, which puts the event (common/runtime/events.py, OwnerTask).
"""

from __future__ import annotations

from typing import Any

from common.delivery import quarantine, release
from common.delivery.results import DigestResult, ReleaseResult
from common.runtime import events
from common.runtime.config import InboundHandlerConfig


def handle(cfg: InboundHandlerConfig, event: Any) -> DigestResult | ReleaseResult:
    task = events.OwnerTask.from_event(event)
    if task.task == "quarantine-digest":
        return quarantine.send_digest(cfg)
    return release.release(cfg, task.quarantine_id, f"cli:{task.by}")
