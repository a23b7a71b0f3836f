"""reply-handler: Lambda entry point. Wiring only; the logic is common.reply."""

from common.reply import handle
from common.runtime import make_handler

handler = make_handler("reply-handler", handle)
