"""One outbox entry (``Owed``) and how entries are read back from the outbox's lines.

Split from ``outbox``, which keeps the file and ``resume``. An entry never holds a value: only
where the copy is (the store, its external id, the store's ``where`` when it declared one).
Lines written before a key existed (``space``, ``where``) still load, with the key None.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger("agent_custody_state.stores.outbox")

Operation = Literal["retract", "forget", "put"]

#: Who finishes a removal owed to a store not configured in the process that reads the outbox
#: (a sentence's end, after "... stays owed there, "): ``outbox.resume`` leaves the entry, logged
LEFT_ELSEWHERE = (
    "which a start here leaves (logged) and only a process with this store configured "
    "finishes; without an outbox, nothing removes this copy"
)


@dataclass(frozen=True)
class Owed:
    """One removal owed to one store. Never the value: only where the copy is."""

    entry: str
    fact_id: str
    store: str
    external_id: str
    operation: Operation
    at: str
    pid: int
    space: str | None = None  # a failed put's: stores may key their copies by it
    where: str | None = None  # where the store wrote the copy (``where``); older lines: None
    started: str | None = None  # the writer's ``outbox_file.process_start``; older lines: None

    def line(self) -> dict[str, Any]:
        line: dict[str, Any] = {
            "owe": self.entry,
            "factId": self.fact_id,
            "store": self.store,
            "externalId": self.external_id,
            "operation": self.operation,
            "at": self.at,
            "pid": self.pid,
        }
        line.update(
            {
                k: v
                for k, v in (
                    ("space", self.space),
                    ("where", self.where),
                    ("started", self.started),
                )
                if v
            }
        )
        return line


def pending_of(records: list[dict[str, Any]]) -> list[Owed]:
    # A line of the wrong shape (edited by hand) is skipped, never fatal: a TypeError here
    # would stop every start and every settle.
    settled = {
        e
        for r in records
        if isinstance(r.get("settled"), list)
        for e in r["settled"]
        if isinstance(e, str)
    }
    owed = []
    for r in records:
        if "owe" not in r:
            continue
        try:
            if r["owe"] in settled:  # inside: an id that is a list or an object is unhashable
                continue
            owed.append(
                Owed(
                    str(r["owe"]),
                    str(r["factId"]),
                    str(r["store"]),
                    str(r["externalId"]),
                    operation_of(r["operation"]),
                    str(r["at"]),
                    int(r["pid"]),
                    str(r["space"]) if r.get("space") is not None else None,
                    str(r["where"]) if r.get("where") else None,
                    str(r["started"]) if r.get("started") else None,
                )
            )
        except (KeyError, TypeError, ValueError):
            log.error("outbox: an entry that cannot be read is skipped: %.200s", r)
    return owed


def operation_of(value: Any) -> Operation:
    return "forget" if value == "forget" else "put" if value == "put" else "retract"
