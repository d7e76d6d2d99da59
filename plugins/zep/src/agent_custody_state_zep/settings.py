"""Settings of a ``zep`` store: the keys of its ``[[stores]]`` table in the server config.

The API key never appears here: ``api_key_env`` names the environment variable holding it.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_custody_state.plugin import MaskedRepr, public_url

API_PREFIX = "/api/v4"
#: The SDK's default API base (``base_url`` unset).
DEFAULT_BASE_URL = "https://api.getzep.com" + API_PREFIX
_SELECTORS = ("graph_uuid", "graph_id", "user_id")


class ZepSettings(MaskedRepr, BaseModel):
    """Which Zep project and graph the custody episodes go to, and how patiently."""

    model_config = ConfigDict(
        extra="forbid", hide_input_in_errors=True, use_attribute_docstrings=True
    )

    api_key_env: str = Field(default="ZEP_API_KEY", min_length=1)
    """Name of the environment variable holding the Zep API key (checked at startup)."""
    base_url: str | None = None
    """API base, e.g. ``https://api.getzep.com/api/v4`` (the SDK default when unset). A bare
    origin gets ``/api/v4`` appended: the v4 SDK's paths are relative to that prefix."""

    graph_uuid: str | None = None
    """The graph, by its Zep-generated UUID (from ``graph.create``)."""
    graph_id: str | None = None
    """A developer-assigned (legacy) graph id, resolved to its UUID with ``graph.lookup``."""
    user_id: str | None = None
    """A developer-assigned user id: episodes go to that user's graph (resolved by lookup)."""

    wait_seconds: float = Field(default=30.0, ge=0)
    """Bound on awaiting a delete, which Zep runs as a background task."""
    add_settle_seconds: float = Field(default=600.0, ge=0)
    """How long an episode add that ended without Zep's answer (a timeout, a dropped connection,
    a 5xx) may still create its episode: until then, or until it turns up, the lookup of that
    fact's copies says it cannot tell yet."""
    timeout: float = Field(default=30.0, gt=0)
    """Seconds for one HTTP request."""
    max_retries: int = Field(default=2, ge=0)
    """Retries on 408/409/429/5xx, each with back-off: the SDK's, except for an episode add,
    which the store sends again itself only when the failure proves nothing was stored (a
    408/409/429, a connection never made): a 5xx or a timeout may have created the episode."""
    max_retry_after: float = Field(default=30.0, ge=0)
    """The longest wait an episode add answered ``Retry-After`` (a 408/409/429 the store sends
    again) honours before it is sent again; an answer asking for longer fails the add at once,
    saying how long Zep asked to wait, rather than holding the write."""
    source_description: str = "agent-custody"
    """``source_description`` of every episode."""
    max_episode_chars: int = Field(default=10_000, gt=0)
    """Zep's cap on episode data; a larger fact is refused before any request is made."""

    def where(self) -> str:
        """Where the episodes go (``Store.where``): the API base without userinfo, query or
        fragment, and the graph as configured (``graph-uuid:``, ``graph:`` or ``user:``).
        No secret, no network call."""
        selector = next(f"{n}:{getattr(self, n)}" for n in _SELECTORS if getattr(self, n))
        return f"{public_url(self.base_url or DEFAULT_BASE_URL)} {selector.replace('_', '-')}"

    @field_validator("base_url")
    @classmethod
    def _v4_prefix(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http(s) URL, got {value!r}")
        path = parts.path or API_PREFIX
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    @field_validator("graph_uuid")
    @classmethod
    def _is_uuid(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                uuid.UUID(value)
            except ValueError:
                raise ValueError(
                    f"graph_uuid must be a Zep-generated UUID, got {value!r}; "
                    "give a developer-assigned id as graph_id"
                ) from None
        return value

    @model_validator(mode="after")
    def _one_graph(self) -> ZepSettings:
        chosen = [name for name in _SELECTORS if getattr(self, name)]
        if len(chosen) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(_SELECTORS)} (got {', '.join(chosen) or 'none'})"
            )
        return self
