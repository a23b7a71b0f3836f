"""attachment-extractor: Lambda entry point. Wiring only; the logic is common.extractor.handler."""

from common.extractor import handle
from common.runtime import make_handler

handler = make_handler("attachment-extractor", handle)
