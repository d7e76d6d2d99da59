"""Residual windows: where a forgotten value may still exist, and until when, per backend.

The facts are those of docs/forget.md ("Where bytes can remain"); an erasure certificate lists
them so that its reader knows what the forget could not reach. In crypto-shred mode the list is
empty: every copy of the events holds only ciphertext whose key is destroyed (the key's own
traces, key-store backups and the key store's own storage, are named in the certificate's method
details).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_custody_state.ledger.backend import EventBackend

_FILE_BLOCKS = {
    "where": "the file-system blocks the old file occupied (and copy-on-write snapshots: "
    "btrfs, ZFS, LVM; blocks an SSD remapped)",
    "until": "the blocks are reused, the snapshots deleted, or the SSD collects them",
}
_COPIES = {
    "where": "copies of the ledger made before the forget: backups, file copies, exports",
    "until": "their retention ends",
}

_POSTGRES = [
    {
        "where": "pg_wal segments holding the INSERT (and full-page images) of the value",
        "until": "the segment is retired after a later checkpoint (checkpoint_timeout, default "
        "5 min, or max_wal_size), once wal_keep_size, replication slots and archive_command let "
        "it go; a recycled segment keeps its bytes until new WAL overwrites it",
    },
    {
        "where": "WAL archives (archive_command, archive_library, pg_receivewal)",
        "until": "the archive's retention ends",
    },
    {
        "where": "physical replicas (relation files and their own pg_wal)",
        "until": "each replica has replayed the forget and the VACUUM FULL, checkpointed and "
        "retired its WAL",
    },
    {
        "where": "logical replication subscribers (a dead row version) and logical slots",
        "until": "the subscriber vacuums its table; the slot's WAL is consumed",
    },
    {
        "where": "base backups, file-system snapshots and pg_dump copies taken before the forget",
        "until": "their retention ends",
    },
    {
        "where": "server logs, when statements and their parameters are logged",
        "until": "the logs are rotated away",
    },
    {
        "where": "the dead row versions of the planner statistics (pg_statistic, its TOAST "
        "table) of the table's json column, which ANALYZE (autovacuum's included) took before "
        "the forget: the forget clears them",
        "until": "autovacuum vacuums pg_statistic, and its freed space is reused",
    },
    {
        "where": "the freed blocks of the table's old relation files",
        "until": "the file system reuses them",
    },
]

_PLAIN: dict[str, list[dict[str, str]]] = {
    "jsonl": [
        _FILE_BLOCKS,
        {"where": "a process holding the old ledger file open", "until": "it closes the file"},
        _COPIES,
    ],
    "sqlite": [
        _FILE_BLOCKS,
        {
            "where": "copies made with cp, .backup or VACUUM INTO, and backups",
            "until": "their retention ends",
        },
    ],
    "postgres": _POSTGRES,
    "memory": [],
}


def residual_windows(backend: str, forget_mode: str) -> list[dict[str, str]]:
    """The places a forgotten value may remain after a forget on ``backend`` (its ``kind``)."""
    if forget_mode == "crypto-shred":
        return []
    known = _PLAIN.get(backend)
    if known is not None:
        return [dict(w) for w in known]
    return [
        {
            "where": f"whatever the {backend} backend keeps outside the files it names",
            "until": "unknown here: see that backend's documentation",
        },
        dict(_COPIES),
    ]


def compaction_residue(backend: EventBackend) -> list[dict[str, str]]:
    """What the backend's last ``compact`` told it could not erase (``compaction_residue``, an
    optional hook: PostgreSQL's old row versions kept for older snapshots), as residual
    windows; in crypto-shred mode the events' backend's."""
    inner = getattr(backend, "inner", backend)
    told = getattr(inner, "compaction_residue", None)
    return [dict(w) for w in told()] if callable(told) else []
