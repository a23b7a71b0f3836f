"""forward-sender: Lambda entry point. Wiring only; the logic is common.senders.handler."""

from common.mail.encrypt import with_mailbox_keys, with_owner_key
from common.runtime.handler import make_handler
from common.senders.handler import handle

# The owner's key and each mailbox's own (MAILBOX_KEYS), both read and checked at cold start.
handler = make_handler("forward-sender", handle, lambda cfg: with_mailbox_keys(with_owner_key(cfg)))
