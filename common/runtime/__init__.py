"""What every function shares at run time: configuration, the handler factory, logging, events.

Most used: ``config`` (each function's settings, parsed at cold start), ``handler`` (the handler
factory), ``log``, ``outcomes`` (what each function reports) and ``addresses`` (the public addresses).
"""
