"""The only code that reads and writes the tables and the mail bucket; the others ask it.

``layout`` names the bucket's keys and which function may write each prefix; each other module owns
one kind of record.
"""

__all__ = [
    "ackbudget",
    "alerts",
    "attachments",
    "conversations",
    "erasure",
    "holds",
    "layout",
    "quarantine",
    "rawmail",
    "replies",
    "senderlists",
    "sendqueue",
    "sendstatus",
    "staging",
]
