"""attachment-extractor: stored PDF and DOCX attachments into text, each parse in a bounded child.

``handle`` is the function's entry point. The face below loads a module only when one of its names is
first used (``common.lazy``), so the parsers load only when a file needs them.
"""

__all__ = ["errors", "handler", "isolate", "ooxml", "pdf", "text"]
