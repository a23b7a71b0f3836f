"""The sender core of ack-sender, forward-sender and reply-sender: exactly once, backoff, rate limit.

``handler.handle`` is the functions' entry point; ``idempotency`` (powertools), ``ratelimit`` and
``status`` are what it is made of.
"""
