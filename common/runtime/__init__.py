"""What every function shares at run time: configuration, the handler factory, logging, events.

The modules are the surface; this package imports none of them, so a function pays only for the
modules it uses.
"""

__all__ = ["clock", "coldstart", "config", "events", "functions", "handler", "log", "views"]
