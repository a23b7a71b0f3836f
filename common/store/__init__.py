"""The only code that reads and writes the tables and the mail bucket; the others ask it.

Each item kind and each bucket prefix has one writing module (the host's ops/erasure.py deletes
across all of them for ``email-handler forget``; the prefixes and who may touch them are
``layout.ACCESS``).
``intake`` sends the writes ``conversations`` and ``ackbudget`` build, with ``senderlists``'s block
checks, as one transaction for a forwarded mail:

============================================  ==============================================
item kind (table) or prefix                   written by
============================================  ==============================================
conversation (conversations)                  ``conversations``
quarantine record (quarantine)                ``quarantine``
sender list entry (sender-lists)              ``senderlists``
suppression and mailbox hold (suppression)    ``sendstatus`` (suppression), ``holds`` (hold)
``corr#``, ``sns#`` (send-status)             ``sendstatus``
``owner-message#`` (send-status)              ``replies``
``alert#`` (send-status)                      ``alerts``
``ack-budget#`` (send-status)                 ``ackbudget``
``staging#`` (send-status)                    ``staging``
``rate#ses`` (send-status)                    ``ratewindow``
send record (idempotency)                     common/senders/idempotency.py (powertools)
``staging/``                                  SES (``staging`` deletes)
``conversations/ sent/ spam/ bounces/``       ``rawmail``
``rejected/``                                 ``rawmail``
``attachments/ withheld/ reply-attachments/``  ``attachments``
``queue-payloads/``                           ``sendqueue``
``extracted-text/`` (texts and error records)  ``extracted``
``config/``                                   the deploy and the owner (``spamrules`` reads)
============================================  ==============================================
"""
