"""service-email-handler: the code that runs in Lambda.

Each subpackage has one role (docs/development.md has the map); code imports the module that defines
a name (``from common.mail.outbound import OutboundMessage``), so importing a module loads only it and
what it imports.
"""

__version__ = "0.1.0"
