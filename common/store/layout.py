"""Every key and prefix of the mail bucket, and which function may do what under each prefix.

The one owner of the bucket's layout: the handlers build their keys here, the extractor parses them
here, and ``deploy/iam.py`` derives each role's S3 statements from :data:`ACCESS`, so a renamed
prefix cannot pass every local test and then be denied on AWS.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

STAGING = "staging/"  # raw mail as SES's S3 action wrote it; deleted when handled
CONVERSATIONS = "conversations/"  # the archive: conversations/<cid>/<sesMessageId>.eml
# The owner's replies as sent, beside the archive of what the contact sent (read by `email-handler
# export`): sent/<cid>/<sesMessageId of the send>.eml
SENT = "sent/"
ATTACHMENTS = "attachments/"  # attachments/<cid>/<sesMessageId>/<file>
# attachments not forwarded (deny-list, SES-unsupported): withheld/<cid>/<sesMessageId>/<file>
WITHHELD = "withheld/"
EXTRACTED = "extracted-text/"  # extracted-text/<cid>/<sesMessageId>/<file>.txt | .error.json
SPAM = "spam/"  # quarantine: spam/<YYYY-MM-DD>/<sesMessageId>.eml
BOUNCES = "bounces/"  # delivery status notifications
REJECTED = "rejected/"  # mail to a thread address that is not an authorised owner reply
REPLY_ATTACHMENTS = "reply-attachments/"  # the owner's attachments on a reply
QUEUE_PAYLOADS = "queue-payloads/"  # claim-check payloads of sender queue messages over the SQS limit
CONFIG = "config/"  # owner-edited configuration (the keyword lists)
# Local modes only (no function may touch it): the wiring's record of each asynchronous invocation,
# what Lambda's invocation records / destinations give on AWS, so `inject` can report a failure.
LOCAL_INVOCATIONS = "local/invocations/"
SPAM_RULES = CONFIG + "spam-rules.txt"

Access = Literal["read", "write", "delete"]

# What each function does under which prefix. IAM grants exactly this (deploy/iam.py); enforced IAM
# in the local modes and the integration suite proves the code needs nothing more.
ACCESS: dict[str, dict[Access, tuple[str, ...]]] = {
    # SPAM is read back when a quarantined mail is released (by an operator through inbound-handler,
    # or by the owner mailing a release address, which reply-handler receives and forwards).
    # CONVERSATIONS and ATTACHMENTS are read through the presigned links a shortened forward carries:
    # S3 authorizes such a GET as the role that signed it (common.aws.s3.presign_get), and both
    # handlers build forwards. WITHHELD is never linked, so neither may read it.
    "inbound-handler": {
        "read": (STAGING, CONFIG, SPAM, CONVERSATIONS, ATTACHMENTS),
        "delete": (STAGING,),
        "write": (CONVERSATIONS, ATTACHMENTS, WITHHELD, SPAM, BOUNCES, QUEUE_PAYLOADS),
    },
    "reply-handler": {
        "read": (STAGING, SPAM, CONVERSATIONS, ATTACHMENTS),
        "delete": (STAGING,),
        "write": (REJECTED, REPLY_ATTACHMENTS, WITHHELD, CONVERSATIONS, ATTACHMENTS, QUEUE_PAYLOADS),
    },
    "attachment-extractor": {"read": (ATTACHMENTS,), "write": (EXTRACTED,), "delete": (EXTRACTED,)},
    "ack-sender": {"read": (QUEUE_PAYLOADS,)},
    "forward-sender": {"read": (QUEUE_PAYLOADS, ATTACHMENTS)},
    "reply-sender": {"read": (QUEUE_PAYLOADS, REPLY_ATTACHMENTS), "write": (SENT,)},
}
# The only prefix each sender may attach files from (a queue message naming any other key is refused).
SENDER_ATTACHMENTS = {"ack-sender": "", "forward-sender": ATTACHMENTS, "reply-sender": REPLY_ATTACHMENTS}
# The one sender that keeps what it sent (the owner's replies, under SENT; ACCESS grants it that prefix).
KEEPS_SENT = frozenset({"reply-sender"})


def day(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def staging(mid: str) -> str:
    return f"{STAGING}{mid}"


def archive(cid: str, mid: str) -> str:
    return f"{CONVERSATIONS}{cid}/{mid}.eml"


def sent(cid: str, ses_id: str) -> str:
    return f"{SENT}{cid}/{ses_id}.eml"


def attachment(cid: str, mid: str, name: str) -> str:
    return f"{ATTACHMENTS}{cid}/{mid}/{name}"


# The raw copies kept under ATTACHMENTS beside the conversations (no conversation id: see below).
COMPLAINT_REPORTS = f"{ATTACHMENTS}complaint/"
RELEASED_ORIGINALS = f"{ATTACHMENTS}quarantine/"


def complaint_report(mid: str) -> str:
    """An abuse complaint (ARF) attached whole to the owner's notice (common/delivery/complaint.py).
    ``complaint`` is no conversation id, as ``quarantine`` below is not."""
    return f"{COMPLAINT_REPORTS}{mid}/report.eml"


def released_original(mid: str) -> str:
    """A quarantined mail released unparsed (it was over a parsing cap): copied inside S3 from the held
    copy and attached whole to its forward as an opaque file.
    ``quarantine`` is no conversation id (those hold ``-at-``, ``-linkedin-`` or end in 12 hex)."""
    return f"{RELEASED_ORIGINALS}{mid}/original.eml"


def withheld(cid: str, mid: str, name: str) -> str:
    return f"{WITHHELD}{cid}/{mid}/{name}"


def reply_attachment(cid: str, mid: str, name: str) -> str:
    return f"{REPLY_ATTACHMENTS}{cid}/{mid}/{name}"


def quarantined(moment: datetime, mid: str) -> str:
    return f"{SPAM}{day(moment)}/{mid}.eml"


def bounce(moment: datetime, mid: str) -> str:
    return f"{BOUNCES}{day(moment)}/{mid}.eml"


def rejected(moment: datetime, mid: str) -> str:
    return f"{REJECTED}{day(moment)}/{mid}.eml"


def local_invocation(request_id: str) -> str:
    return f"{LOCAL_INVOCATIONS}{request_id}.json"


def queue_payload(digest: str) -> str:
    return f"{QUEUE_PAYLOADS}{digest}.json"


def is_attachment(key: str) -> bool:
    """``attachments/<cid>/<id>/<file>`` with every segment present."""
    parts = key.split("/")
    return key.startswith(ATTACHMENTS) and len(parts) == 4 and all(parts)


def extracted_text(attachment_key: str) -> str:
    return EXTRACTED + attachment_key.removeprefix(ATTACHMENTS) + ".txt"


def extraction_error(attachment_key: str) -> str:
    return EXTRACTED + attachment_key.removeprefix(ATTACHMENTS) + ".error.json"
