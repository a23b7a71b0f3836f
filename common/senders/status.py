"""What a sender answers per message: the ``status`` of its result, stored with the idempotency record.

The values are the strings the records and logs have always carried (a StrEnum is its string in JSON).
"""

from __future__ import annotations

from enum import StrEnum


class SendStatus(StrEnum):
    SENT = "sent"  # SES accepted it
    DUPLICATE = "duplicate"  # its idempotency key was already completed: the stored result, not resent
    SUPPRESSED = "suppressed"  # every recipient is on the suppression list
    DEAD_LETTERED = "dead-lettered"  # retrying cannot help: moved to the DLQ at once
    CANCELLED = "cancelled"  # enqueued before `email-handler forget` forgot its contact: dropped
    REQUEUED = "requeued"  # the daily quota is used up: a delayed copy replaces it
