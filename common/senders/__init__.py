"""The sender core of ack-sender, forward-sender and reply-sender: exactly once, backoff, rate limit.

``handle`` is the functions' entry point. The face below loads a module only when one of its names is
first used (``common.lazy``), so importing the package costs nothing at cold start.
"""

__all__ = ["handler", "idempotency", "ratelimit", "status"]
