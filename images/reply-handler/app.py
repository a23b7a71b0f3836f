"""reply-handler: Lambda entry point. Wiring only; the logic is common.reply.handler."""

from common.reply.handler import handle
from common.runtime.handler import make_handler

handler = make_handler("reply-handler", handle)
