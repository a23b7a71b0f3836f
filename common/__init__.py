"""service-email-handler shared package."""

__version__ = "0.1.0"
