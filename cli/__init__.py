"""The console script's framework, below every host package that defines commands (local, ops).

Host-only: never copied into an image. Imports only ``common``.
"""
