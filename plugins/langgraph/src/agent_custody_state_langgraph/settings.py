"""Settings of a ``[[stores]]`` table with ``type = "langgraph"`` (no LangGraph imported here).

    [[stores]]
    name = "langmem"
    type = "langgraph"
    backend = "postgres"              # memory | sqlite | postgres
    dsn_env = "LANGGRAPH_PG_URL"      # postgres: the variable holding the URL
    namespace = ["memories", "dana"]  # LangMem's ("memories", <user>); "{space}" = the fact's space
    statement_timeout = 30            # postgres: seconds a statement may run or wait for a lock

An optional vector index (``index_dimensions`` + ``index_embed``, a batch function
``texts -> list of vectors``) embeds each item's ``content`` as LangMem's search does; removal
is then also checked by a vector search.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_custody_state.plugin import ConfigPath, MaskedRepr

_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class LangGraphSettings(MaskedRepr, BaseModel):
    """Which BaseStore, which namespace, and the optional vector index."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    backend: Literal["memory", "sqlite", "postgres"] = Field(
        "memory", description="InMemoryStore (this process only), SqliteStore or PostgresStore"
    )
    path: ConfigPath | None = Field(
        None, description="sqlite: the database file (relative: to the config file's folder)"
    )
    dsn_env: str | None = Field(None, description="postgres: variable holding the URL")
    namespace: tuple[str, ...] = Field(
        ("memories", "{space}"),
        description='namespace labels; "{space}" is replaced by the fact\'s space',
    )
    index_dimensions: int | None = Field(None, ge=1, description="vector index dimensions")
    index_embed: str | None = Field(None, description='"module:function", texts -> vectors')
    top_k: int = Field(10, ge=1, le=1000, description="hits read by the verification search")
    statement_timeout: float = Field(
        30.0, gt=0, description="postgres: seconds one statement may run, lock waits included"
    )

    @field_validator("namespace")
    @classmethod
    def _labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("namespace needs at least one label")
        for label in value:
            if not label or "." in label:
                raise ValueError(
                    f'namespace labels must be non-empty and contain no "."; got "{label}"'
                )
        if value[0] == "langgraph":
            raise ValueError('the namespace root may not be "langgraph" (LangGraph reserves it)')
        return value

    @field_validator("index_embed")
    @classmethod
    def _reference(cls, value: str | None) -> str | None:
        if value is not None and not _REF.fullmatch(value):
            raise ValueError(f'index_embed must be "module:function"; got "{value}"')
        return value

    @model_validator(mode="after")
    def _backend_needs(self) -> LangGraphSettings:
        if self.backend == "sqlite" and not self.path:
            raise ValueError('backend "sqlite" needs path')
        if self.backend == "postgres" and not self.dsn_env:
            raise ValueError('backend "postgres" needs dsn_env (the variable holding the URL)')
        if self.backend != "sqlite" and self.path:
            raise ValueError(f'path is only for backend "sqlite", not "{self.backend}"')
        if self.backend != "postgres" and self.dsn_env:
            raise ValueError(f'dsn_env is only for backend "postgres", not "{self.backend}"')
        if self.backend != "postgres" and "statement_timeout" in self.model_fields_set:
            raise ValueError(
                f'statement_timeout is only for backend "postgres", not "{self.backend}"'
            )
        if (self.index_dimensions is None) != (self.index_embed is None):
            raise ValueError("give both index_dimensions and index_embed, or neither")
        return self
