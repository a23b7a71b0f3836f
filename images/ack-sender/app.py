"""ack-sender: Lambda entry point. Wiring only; the logic is common.sender."""

from common.sender import handle
from common.runtime import make_handler

handler = make_handler("ack-sender", handle)
