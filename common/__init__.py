"""service-email-handler shared package, and the one helper its packages' faces share.

Lazy package faces (PEP 562, module ``__getattr__`` and ``__dir__``: https://peps.python.org/pep-0562/):
each package's ``__init__.py`` names the few things other packages use and maps each name to the
submodule that defines it; the submodule loads when the name is first read. So ``from common.mail
import OutboundMessage`` in a sender loads ``common/mail/outbound.py`` alone, not the HTML sanitiser
and the CSS scoping beside it, and a cold start pays only for what its function reaches. The helper
lives here, not in a module of its own, because every import of the project loads this file anyway:
a face costs no module more, and nothing here imports anything of the project.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__version__ = "0.1.0"


def lazy(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``. ``exports`` maps each exported name to the
    submodule that defines it; a name that is the submodule's own name is the module itself (importing
    a submodule binds its name on the package, so that name can never be anything else)."""

    def attribute(name: str) -> object:
        submodule = exports.get(name)
        if submodule is None:
            # also how ``from package import submodule`` of an unexported submodule still works: the
            # import system takes the AttributeError as "not an attribute" and imports the submodule
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{submodule}")
        value = module if name == submodule else getattr(module, name)
        # bound on the package, so this runs once per name and later reads are plain lookups
        setattr(sys.modules[package], name, value)
        return value

    def names() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return attribute, names
