"""The sender core of ack-sender, forward-sender and reply-sender: exactly once, backoff, rate limit.

The modules are the surface (``handler.handle`` is the functions' entry point); this package imports
none of them, so importing it costs nothing at cold start.
"""

__all__ = ["handler", "idempotency", "ratelimit", "status"]
