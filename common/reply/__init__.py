"""reply-handler's logic: ``handler`` (the entry), ``auth`` (is it the owner's message), ``owner``
(owner controls and new conversations), ``text`` and ``scrub`` (cleaning the reply's text)."""
