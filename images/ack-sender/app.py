"""ack-sender: Lambda entry point. Wiring only; the logic is common.senders.handler."""

from common.runtime import make_handler
from common.senders import handle

handler = make_handler("ack-sender", handle)
