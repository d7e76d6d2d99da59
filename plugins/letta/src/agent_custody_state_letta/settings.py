"""Settings of a ``type = "letta"`` store: the keys of its ``[[stores]]`` table.

Secrets never appear here: ``api_key_env`` names the environment variable that holds the key.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_custody_state.plugin import MaskedRepr

from .tags import CUSTODY_TAG, RESERVED_PREFIXES


class LettaSettings(MaskedRepr, BaseModel):
    """Where the passages go and how to reach Letta."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    agent_id: str = Field(
        pattern=r"^agent-[0-9a-fA-F-]{36}$",
        description="The agent whose archival memory receives the facts ('agent-<uuid>').",
    )
    # Explicit rather than the SDK's LETTA_BASE_URL lookup: a stray variable in the server's
    # environment must not silently redirect custody writes.
    base_url: str = Field(
        default="https://api.letta.com",
        description="Letta server origin (no path); a self-hosted server is usually "
        "http://localhost:8283.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (required for "
        "Letta Cloud); leave it out for a self-hosted server without auth.",
    )
    project: str | None = Field(default=None, description="Letta Cloud project (X-Project).")
    tags: list[str] = Field(default_factory=list, description="Extra tags added to every passage.")
    timeout: float = Field(default=30.0, gt=0, description="Seconds per HTTP request.")
    max_retries: int = Field(
        default=2,
        ge=0,
        description="SDK retries on 408/409/429/5xx and connection errors (never of a passage "
        "create: Letta takes no idempotency key, so a retry could write the passage twice).",
    )

    write_settle_seconds: float = Field(
        default=600.0,
        ge=0,
        description="How long a passage write that ended without Letta's answer (a timeout, a "
        "dropped connection, a 5xx) may still land on the server: until then, or until its "
        "copy turns up, the lookup of that fact's copies says it cannot tell yet.",
    )

    @field_validator("tags")
    @classmethod
    def _not_custody_tags(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not tag.strip():
                raise ValueError("tags must not be empty")
            if tag == CUSTODY_TAG or tag.startswith(RESERVED_PREFIXES):
                # A configured tag must never be mistaken for custody when decoding.
                raise ValueError(
                    f"tag {tag!r} is reserved: the adapter writes {CUSTODY_TAG!r} and the "
                    f"{', '.join(RESERVED_PREFIXES)} tags itself"
                )
        return tags

    @model_validator(mode="after")
    def _cloud_needs_a_key(self) -> Self:
        # Without this, a forgotten key would surface as a 401 on the first write, not at startup.
        if "api.letta.com" in self.base_url and not self.api_key_env:
            raise ValueError("api_key_env is required for Letta Cloud (api.letta.com)")
        return self
