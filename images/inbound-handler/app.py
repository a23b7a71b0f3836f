"""inbound-handler: Lambda entry point. Wiring only; the logic is common.inbound.handler."""

from common.inbound.handler import handle
from common.runtime.handler import make_handler

handler = make_handler("inbound-handler", handle)
