"""Settings of a ``type = "cognee"`` store: the keys of its ``[[stores]]`` table.

Secrets never appear here: ``api_key_env`` (sent as ``X-Api-Key``) or ``token_env`` (sent as
``Authorization: Bearer``) names the environment variable that holds the credential.
"""

from __future__ import annotations

import uuid
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_custody_state.plugin import MaskedRepr


class CogneeSettings(MaskedRepr, BaseModel):
    """Which Cognee server and dataset receive the facts, and how to authenticate."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    url: str = Field(description="Server origin, e.g. http://127.0.0.1:8000 (no /api path).")
    dataset_id: uuid.UUID | None = Field(default=None, description="An existing dataset's id.")
    dataset_name: str | None = Field(
        default=None, description="A dataset name; Cognee creates it on the first write."
    )
    api_key_env: str | None = Field(
        default=None, description="Variable holding an API key (sent as X-Api-Key)."
    )
    token_env: str | None = Field(
        default=None, description="Variable holding a bearer token (Authorization: Bearer)."
    )
    timeout: float = Field(default=30.0, gt=0, description="Seconds per HTTP request.")
    page_size: int = Field(
        default=100, ge=1, le=1000, description="Items per page when listing the dataset."
    )
    add_settle_seconds: float = Field(
        default=600.0,
        ge=0,
        description="How long an add that ended without Cognee's answer (a timeout, a dropped "
        "connection, a 5xx) may still land on the server: until then, or until its item turns "
        "up, the lookup of that fact's copies says it cannot tell yet.",
    )

    @field_validator("url")
    @classmethod
    def _origin(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _one_dataset_one_credential(self) -> Self:
        if (self.dataset_id is None) == (not self.dataset_name):
            raise ValueError("set exactly one of dataset_id and dataset_name")
        if self.api_key_env and self.token_env:
            raise ValueError("set at most one of api_key_env and token_env")
        return self
