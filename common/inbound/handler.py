"""inbound-handler logic: one table from the event's kind to the module that handles it.

* ``ses``: a mail to the public address (common/inbound/receipt.py);
* ``sns``: SES feedback, Delivery / Bounce / Complaint (common/inbound/feedback.py);
* ``eventbridge``: the quarantine digest and an operator's release (common/inbound/schedule.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from common.delivery.results import DigestResult, InboundResult, ReleaseResult
from common.inbound import feedback, receipt, schedule
from common.inbound.feedback import FeedbackResult
from common.runtime import events
from common.runtime.config import InboundHandlerConfig

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

Result = InboundResult | FeedbackResult | DigestResult | ReleaseResult

ENTRIES: dict[str, Callable[[InboundHandlerConfig, Any], Result]] = {
    "ses": receipt.handle,
    "sns": feedback.handle,
    "eventbridge": schedule.handle,
}


def handle(cfg: InboundHandlerConfig, event: Any, context: LambdaContext | None = None) -> Result:
    # Any other kind goes to the receipt, whose event parser says what is wrong with it.
    return ENTRIES.get(events.kind(event), receipt.handle)(cfg, event)
