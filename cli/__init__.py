"""The console script's framework, below every host package that defines commands (local, ops).

Host-only: never copied into an image. Imports only ``common``.
"""

from cli.command import DEFAULT_ENDPOINT, ENDPOINT, Arg, Command, arg, command, endpoint, run_until_signalled
from cli.termsafe import SafeStream

__all__ = [
    "DEFAULT_ENDPOINT",
    "ENDPOINT",
    "Arg",
    "Command",
    "SafeStream",
    "arg",
    "command",
    "endpoint",
    "run_until_signalled",
]
