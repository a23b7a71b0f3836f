"""The one error a deploy stops with: what went wrong and what to do about it."""

from __future__ import annotations

from common.errors import EmailHandlerError


class DeployError(EmailHandlerError):
    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}\n  what to do: {fix}")
        self.problem, self.fix = problem, fix
