"""reply-handler: Lambda entry point. Wiring only; the logic is common.reply.handler."""

from common.mail.encrypt import with_owner_key
from common.reply.handler import handle
from common.runtime.handler import make_handler

handler = make_handler("reply-handler", handle, with_owner_key)
