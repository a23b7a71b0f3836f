"""reply-handler: Lambda entry point. Wiring only; the logic is common.reply.handler."""

from common.mail import with_owner_key
from common.reply import handle
from common.runtime import make_handler

handler = make_handler("reply-handler", handle, with_owner_key)
