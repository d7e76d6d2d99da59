"""Settings of a ``mem0`` store: the keys of its ``[[stores]]`` table in the server config.

Secrets never appear here: ``api_key_env`` names the environment variable holding the platform
key, and ``local_env`` names variables whose values are placed into the local configuration.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_custody_state.plugin import (
    ConfigPath,
    MaskedRepr,
    embedding_provider,
    postgres_table,
    public_url,
    residual_window,
    service_copies,
)

_PLATFORM_ONLY = ("host", "app_id", "pending_file")
_LOCAL_ONLY = ("local_config", "local_env", "local_objects")
#: The platform's origin when ``host`` is unset (the SDK's default).
DEFAULT_HOST = "https://api.mem0.ai"
#: The keys of a local vector store's config that say where it keeps its vectors.
_PLACE_KEYS = ("url", "host", "port", "path", "dbname", "database", "collection_name")


def _table(value: Any) -> dict[str, Any]:
    """A table of ``local_config`` (anything else reads as an empty one)."""
    return value if isinstance(value, dict) else {}


class Mem0Settings(MaskedRepr, BaseModel):
    """How to reach mem0 and under which entity the custody memories live."""

    model_config = ConfigDict(
        extra="forbid", hide_input_in_errors=True, use_attribute_docstrings=True
    )

    mode: Literal["platform", "local"] = "platform"
    """``platform``: the hosted API through ``MemoryClient``; ``local``: the open-source
    ``Memory`` running in this process."""

    user_id: str = Field(min_length=1)
    """The mem0 user every fact is written for (and the scope verification searches)."""
    agent_id: str | None = None
    """Optional agent scope, added to writes and to the verification filters."""
    app_id: str | None = None
    """Optional app scope (platform only)."""

    unique_text: bool = False
    """Always append ``(fact <factId>)`` to the memory text. Off by default: the text is the
    fact verbatim, and only a fact whose text mem0 de-duplicated onto another fact's memory is
    re-written with the marker (see the README)."""

    # -- platform ---------------------------------------------------------------------------
    api_key_env: str = Field(default="MEM0_API_KEY", min_length=1)
    """Name of the environment variable holding the platform API key (checked at startup)."""
    host: str | None = None
    """Platform origin, e.g. ``https://api.mem0.ai`` (the SDK default when unset)."""
    timeout: float = Field(default=30.0, gt=0)
    """Seconds for one HTTP request (the SDK's own default is 300)."""
    event_wait_seconds: float = Field(default=30.0, ge=0)
    """Bound on waiting for an add the platform answered ``PENDING`` (polled by event id)."""
    pending_file: ConfigPath | None = None
    """File recording the add events a put has not seen settle, so that a restarted server
    still counts them as possible copies (relative: to the config file's folder; its folder
    must exist). Default: ``pending-adds-<store>-<scope digest>.jsonl`` in ``mem0_dir``; name
    a lasting place when ``mem0_dir`` is the temp default (a reboot may empty it)."""

    # -- local ------------------------------------------------------------------------------
    local_config: dict[str, Any] | None = None
    """``Memory.from_config`` dict (``vector_store``, ``embedder``, ``history_db_path``...).
    Without ``llm`` a placeholder is configured: writes use ``infer=False`` and never call it."""
    local_env: dict[str, str] = Field(default_factory=dict)
    """Dotted path in ``local_config`` -> environment variable whose value is put there,
    e.g. ``{"embedder.config.api_key" = "OPENAI_API_KEY"}``."""
    local_objects: dict[str, str] = Field(default_factory=dict)
    """Dotted path in ``local_config`` -> ``"module:callable"`` called without arguments, for
    values TOML cannot hold (a LangChain embeddings object for the ``langchain`` embedder)."""

    # -- both -------------------------------------------------------------------------------
    mem0_dir: ConfigPath | None = None
    """Directory mem0 keeps its own files in (``MEM0_DIR``; relative: to the config file's
    folder); default: a per-user directory
    under the system temp dir, so the SDK does not write ``~/.mem0``. An ``MEM0_DIR`` already in
    the environment wins."""
    telemetry: bool = False
    """mem0's anonymous PostHog telemetry. Off unless asked for; read when mem0 is imported."""

    def default_pending_file(self, name: str, folder: str) -> str:
        """``pending_file`` when unset: in ``folder`` (mem0's), one file per store name,
        platform and scope (another host's or user's events are not this store's)."""
        scope = (public_url(self.host or DEFAULT_HOST), self.user_id, self.agent_id, self.app_id)
        digest = hashlib.sha256("\n".join(s or "" for s in scope).encode()).hexdigest()[:12]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        return os.path.join(folder, f"pending-adds-{safe}-{digest}.jsonl")

    def where(self) -> str:
        """Where the memories go (``Store.where``): the platform origin (no userinfo, query or
        fragment) or the local vector store's provider and location, then the entity scope.
        Read from the settings alone: no secret (``local_env`` values are never read), no
        network call. The platform's project is the API key's, so it cannot be named."""
        if self.mode == "platform":
            place = public_url(self.host or DEFAULT_HOST)
        else:
            store = (self.local_config or {}).get("vector_store") or {}
            config = store.get("config") or {} if isinstance(store, dict) else {}
            place = f"local:{store.get('provider', 'default') if isinstance(store, dict) else ''}"
            for key in _PLACE_KEYS:
                value = config.get(key) if isinstance(config, dict) else None
                if isinstance(value, str | int) and not isinstance(value, bool):
                    text = str(value)
                    place += f" {key}:{public_url(text) if '://' in text else text}"
        scope = [("user", self.user_id), ("agent", self.agent_id), ("app", self.app_id)]
        return place + "".join(f" {name}:{value}" for name, value in scope if value)

    def residual(self) -> list[dict[str, str]]:
        """Where a removed memory may remain (``Store.residual``), from the settings alone."""
        if self.mode == "platform":
            return [
                residual_window(
                    "the memory's history on the mem0 platform (its earlier texts), which has "
                    "no documented delete and is not checked",
                    "the platform deletes it: see its data-processing terms",
                ),
                service_copies("the mem0 platform"),
                embedding_provider("the mem0 platform's embedding models"),
            ]
        local = self.local_config or {}
        store: dict[str, Any] = _table(local.get("vector_store"))
        config: dict[str, Any] = _table(store.get("config"))
        provider = str(store.get("provider", "qdrant"))
        if provider in ("pgvector", "postgres"):
            windows = postgres_table(str(config.get("collection_name", "mem0")))
        else:
            windows = [
                residual_window(
                    f"the deleted entry in the {provider} vector store's files (segments, "
                    "write-ahead log), its replicas and backups",
                    "the vector store compacts its segments and the backups expire",
                )
            ]
        embedder: dict[str, Any] = _table(local.get("embedder"))
        windows.append(
            residual_window(
                "copies and backups of mem0's history database (the memory's own rows are "
                "deleted with secure_delete on)",
                "their retention ends",
            )
        )
        model = str(embedder.get("provider", "openai"))
        windows.append(embedding_provider(f"the {model} embedder (if remote)"))
        return windows

    @model_validator(mode="after")
    def _mode_specific(self) -> Mem0Settings:
        if self.mode == "platform":
            misplaced = [k for k in _LOCAL_ONLY if getattr(self, k)]
        else:
            misplaced = [k for k in _PLATFORM_ONLY if getattr(self, k)]
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} do(es) not apply to mode {self.mode!r}")
        return self
