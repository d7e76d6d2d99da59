"""Write-through stores: the retrieval systems a team already runs (mem0, Zep, pgvector, ...).

``base`` holds the ``Store`` protocol every adapter implements and the text and metadata each
store receives; ``storeset`` the ordered set of configured stores with removal and verification;
``flows`` the custody flows (write, supersede, retract, forget, sweep) that the MCP server and the
command line both call; ``orphans`` the cleanup of a copy a failed put left (and
``orphan_resume`` its retry from the outbox); ``kit`` helpers for adapters; ``inprocess`` the
reference store.
"""

from __future__ import annotations

from agent_custody_state.stores.base import (
    Store,
    StoreError,
    Verification,
    custody_metadata,
    fact_text,
)
from agent_custody_state.stores.storeset import (
    RemovalReport,
    StoreSet,
    StoreWriteError,
    VerifyPolicy,
)

__all__ = [
    "RemovalReport",
    "Store",
    "StoreError",
    "StoreSet",
    "StoreWriteError",
    "Verification",
    "VerifyPolicy",
    "custody_metadata",
    "fact_text",
]
