"""ack-sender: Lambda entry point. Wiring only; the logic is common.senders.handler."""

from common.runtime.handler import make_handler
from common.senders.handler import handle

handler = make_handler("ack-sender", handle)
