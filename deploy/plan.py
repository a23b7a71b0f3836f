"""The one converge step every resource goes through: describe -> compare -> note -> apply.

A step describes what exists (``None``: nothing), lists what differs from what the code wants, and
hands :meth:`Run.converge` the calls that create or update it. The Run records ``create``,
``update``, ``unchanged`` (or ``delete`` for ``email-handler destroy``) and applies the change only
when it is not a dry run, so a plan and a run list the same changes by construction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from deploy.config import Config

CREATE, UPDATE, UNCHANGED, DELETE = "create", "update", "unchanged", "delete"


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    name: str
    action: str  # create | update | unchanged | delete
    detail: str = ""

    def __str__(self) -> str:
        return (
            f"{self.action:<9} {self.kind:<18} {self.name}{'  (' + self.detail + ')' if self.detail else ''}"
        )


class Run:
    """The changes of one provisioning, deploy or destroy run; applied unless it is a dry run."""

    def __init__(
        self,
        cfg: Config,
        apply: bool,
        report: Callable[[Change], None] | None,
        say: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cfg, self.apply, self.report = cfg, apply, report
        self.say = say or (lambda line: None)  # progress while a step waits on AWS
        self.sleep = sleep  # how a step waits (tests pass one that does not)
        self.changes: list[Change] = []

    def note(self, kind: str, name: str, action: str, detail: str = "") -> str:
        change = Change(kind, name, action, detail)
        self.changes.append(change)
        if self.report:
            self.report(change)
        return action

    def converge(
        self,
        kind: str,
        name: str,
        current: Any,
        differ: Sequence[str] = (),
        *,
        create: Callable[[], Any] | None = None,
        update: Callable[[Sequence[str]], Any] | None = None,
        detail: str = "",
        create_detail: str | None = None,
    ) -> str:
        """Record and (unless dry) apply: ``create()`` when ``current`` is None, ``update(differ)`` when
        something differs, nothing otherwise. Returns the action."""
        if current is None:
            self.note(kind, name, CREATE, detail if create_detail is None else create_detail)
            if self.apply and create is not None:
                create()
            return CREATE
        if not differ:
            return self.note(kind, name, UNCHANGED, detail if create_detail is None else "")
        self.note(
            kind,
            name,
            UPDATE,
            ", ".join(differ) + (f"; {detail}" if detail and create_detail is None else ""),
        )
        if self.apply and update is not None:
            update(differ)
        return UPDATE

    def remove(self, kind: str, name: str, exists: bool, delete: Callable[[], Any], detail: str = "") -> str:
        """``email-handler destroy``: delete what exists (a dry run only lists it)."""
        if not exists:
            return UNCHANGED
        self.note(kind, name, DELETE, detail)
        if self.apply:
            delete()
        return DELETE


def canonical(doc: Any) -> Any:
    """Policy-like documents compare equal regardless of key order, list order or one-element lists."""
    if isinstance(doc, dict):
        return {k: canonical(v) for k, v in sorted(doc.items())}
    if isinstance(doc, list):
        items = [canonical(v) for v in doc]
        return items[0] if len(items) == 1 else sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return doc


def same(have: Any, want: Any) -> bool:
    if isinstance(want, float):
        return have is not None and float(have) == want
    return bool(canonical(have) == canonical(want))


def differing(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The keys of ``want`` whose value ``have`` does not match."""
    return [k for k, v in want.items() if not same(have.get(k), v)]
