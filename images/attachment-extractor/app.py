"""attachment-extractor: Lambda entry point. Wiring only; the logic is common.extractor.handler."""

from common.extractor.handler import handle
from common.runtime.handler import make_handler

handler = make_handler("attachment-extractor", handle)
