"""What every function shares at run time: configuration, the handler factory, logging, events.

The face below names what other packages use, each loaded from its module on first use
(``common.lazy``), so a function pays only for the modules it uses. ``config``, ``addresses`` and
``events`` are also exported whole: their callers read them as namespaces (``config.load``).
"""

__all__ = ["clock", "coldstart", "config", "events", "functions", "handler", "log", "views"]
