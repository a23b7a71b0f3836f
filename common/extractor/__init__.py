"""attachment-extractor: stored PDF and DOCX attachments into text, each parse in a bounded child.

``handler.handle`` is the function's entry point; ``pdf`` and ``ooxml`` import their parsers only when
a file needs them (the heavy dependencies are listed in docs/development.md).
"""
