"""What the mem0 store needs from either flavour of mem0, as one small blocking interface.

``Mem0Store`` holds the custody logic (de-duplication guard, removal checks) once; the hosted
``MemoryClient`` and the in-process ``Memory`` each implement this protocol. Every method
blocks and is run in a worker thread by the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Record = dict[str, Any]


@dataclass(frozen=True)
class Added:
    """The outcome of an add: a memory id, or an event to wait for (platform async path)."""

    memory_id: str | None = None
    event_id: str | None = None


@dataclass(frozen=True)
class EventState:
    """A platform add event: ``done`` once it succeeded or failed."""

    done: bool
    memory_id: str | None = None
    error: str | None = None


class Mem0Backend(Protocol):
    def add(self, text: str, metadata: dict[str, Any]) -> Added:
        """Store ``text`` verbatim (no inference) with ``metadata`` for the configured scope."""

    def event(self, event_id: str) -> EventState:
        """The state of an asynchronous add (platform only)."""

    def get(self, memory_id: str) -> Record | None:
        """The memory, or ``None`` when it does not exist."""

    def delete(self, memory_id: str) -> None:
        """Delete the memory; a memory that is already gone is not an error."""

    def residue(self, memory_id: str) -> bool:
        """Whether the memory's text is still kept beside it (the local history table).
        Optional: a backend without it is taken to keep nothing beside the memory."""

    def by_fact(self, fact_id: str) -> list[Record]:
        """Memories of the configured scope whose metadata ``factId`` is ``fact_id``."""

    def search(self, text: str) -> list[Record]:
        """Semantic search for ``text`` in the configured scope, without a score threshold."""

    def close(self) -> None:
        """Release clients and files."""


def first_id(results: Any) -> str | None:
    """The first memory id in an add or event ``results`` list."""
    for result in results if isinstance(results, list) else []:
        if isinstance(result, dict) and result.get("id"):
            return str(result["id"])
    return None
