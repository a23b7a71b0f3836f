"""forward-sender: Lambda entry point. Wiring only; the logic is common.senders.handler."""

from common.mail.encrypt import with_owner_key
from common.runtime.handler import make_handler
from common.senders.handler import handle

handler = make_handler("forward-sender", handle, with_owner_key)
