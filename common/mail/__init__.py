"""Mail as data, never a table or the bucket: parsing received mail within its caps (``parse``,
``headers``, ``charsets``, ``htmldoc``, ``htmltext``, ``htmlsafe``, ``limits``, ``filetypes``,
``withhold``, ``trackers``, ``autoreply``), the queue contract (``outbound``), building and
encrypting outgoing MIME (``build``, ``encrypt``), thread addresses and conversation ids
(``threads``) and safe names (``sanitize``)."""
