"""Where a write-through store's removed copy may still exist: its residual windows.

A store's ``remove`` takes the fact out of what the store serves and ``verify_removed`` checks
that it is no longer served; neither reaches the store's own backups, its database's old row
versions and WAL, the request logs of the embedding model that was sent the text, or what the
store derived from the text (a Zep node summary, a Cognee graph). An erasure certificate lists
those places beside the ledger's own (``residualWindows``, each with ``"store": <name>``), so its
reader knows what the forget could not reach, in crypto-shred mode too: a store is sent the
plaintext.

A store declares them as ``residual`` (an attribute or property): a sequence of
``{"where": ..., "until": ...}`` texts built from its settings, without a network call and
without a secret. A store that declares nothing (or something of another shape) is listed with
``UNDECLARED``: the certificate does not claim that nothing remains. The helpers below are the
windows several stores share, so each plugin names its own and reuses the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_custody_state.stores.base import redact

Window = dict[str, str]

__all__ = [
    "UNDECLARED",
    "Window",
    "embedding_provider",
    "postgres_table",
    "process_memory",
    "residual_of",
    "service_copies",
    "sqlite_file",
    "window",
]


def window(where: str, until: str) -> Window:
    """One residual window: a place the removed value may remain, and until when."""
    return {"where": where, "until": until}


UNDECLARED: tuple[Window, ...] = (
    window(
        "whatever the store keeps beyond what it serves: its backups, logs, replicas and "
        "anything it derived from the text",
        "unknown: the store declares nothing (Store.residual)",
    ),
)


def process_memory() -> Window:
    """A store kept in this process's memory (freed objects are not overwritten at once)."""
    return window(
        "this process's memory, where the removed copy's objects were freed",
        "the memory is reused, or the process exits",
    )


def service_copies(service: str) -> Window:
    """The backups, replicas and request logs of a hosted ``service`` that was sent the text."""
    return window(
        f"{service}'s backups, replicas and request logs, which hold the text sent to it",
        f"{service}'s own retention ends: see its data-processing terms",
    )


def embedding_provider(model: str) -> Window:
    """The provider of ``model`` (a noun phrase), which was sent the text to embed (or to
    extract facts from) it."""
    return window(
        f"the request logs of the provider of {model}, which received the text",
        "the provider's retention ends: see its data-processing terms",
    )


def postgres_table(table: str) -> list[Window]:
    """What a ``DELETE`` from a PostgreSQL ``table`` leaves (no ``VACUUM FULL`` follows it)."""
    return [
        window(
            f"the dead row version of the deleted row in {table}'s files (heap, TOAST, indexes)",
            "VACUUM (autovacuum) frees it and a later write reuses the space; the freed "
            "blocks of the files keep their bytes until then",
        ),
        window(
            "the database's WAL and its archives, physical replicas and base backups",
            "the WAL segment is recycled and the archives and backups expire",
        ),
    ]


def sqlite_file(path: str) -> list[Window]:
    """What a ``DELETE`` from the SQLite database at ``path`` leaves."""
    return [
        window(
            f"old page images in {path}'s -wal or rollback journal, and its freed pages "
            "unless the connection sets secure_delete",
            "the WAL is checkpointed and reused, the pages are reused, and the file system "
            "reuses the blocks",
        ),
        window(f"copies and backups of {path}", "their retention ends"),
    ]


def _window(w: Any) -> bool:
    return (
        isinstance(w, Mapping)
        and set(w) == {"where", "until"}
        and all(isinstance(w[k], str) and w[k] for k in ("where", "until"))
    )


def residual_of(store: object) -> list[Window]:
    """The residual windows of ``store`` (a ``Store``, or None for a store the ledger records
    but that is not configured): what it declares, else ``UNDECLARED``."""
    try:
        declared = getattr(store, "residual", None)
        listed = [] if isinstance(declared, (str, bytes, Mapping)) else list(declared or ())
    except Exception:  # a property that raised, or not a sequence: nothing can be trusted
        listed = []
    if listed and all(_window(w) for w in listed):
        return [{"where": redact(w["where"]), "until": redact(w["until"])} for w in listed]
    return [dict(w) for w in UNDECLARED]
