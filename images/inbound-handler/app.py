"""inbound-handler: Lambda entry point. Wiring only; the logic is common.inbound.handler."""

from common.inbound import handle
from common.runtime import make_handler

handler = make_handler("inbound-handler", handle)
