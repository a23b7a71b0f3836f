"""Commands that act on a deployment, local or on AWS (host-only: never copied into an image).

``cli`` is the console script `email-handler` and its one command table; ``deployment`` the deploy,
status, destroy and replay commands; ``status`` what `email-handler status` reads; ``admin`` the owner
and operator commands (quarantine, block/allow/unblock, suppression, dlq, conversations, forget).
"""
