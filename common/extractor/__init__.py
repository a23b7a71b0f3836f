"""attachment-extractor: stored PDF and DOCX attachments into text, each parse in a bounded child.

The modules are the surface (``handler.handle`` is the function's entry point); this package imports
none of them, so the parsers load only when a file needs them.
"""

__all__ = ["errors", "handler", "isolate", "ooxml", "pdf", "text"]
