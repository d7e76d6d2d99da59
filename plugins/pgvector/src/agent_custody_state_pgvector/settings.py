"""Settings of a ``[[stores]]`` table with ``type = "pgvector"`` (no driver imported here).

[[stores]]
name = "vectors"
type = "pgvector"
dsn_env = "PGVECTOR_URL"          # the variable holding postgresql://user:password@host/db
table = "custody_facts"           # optionally schema-qualified
dimensions = 384
embed = "my_embeddings:embed"     # text -> list[float] of `dimensions` floats
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_custody_state.plugin import MaskedRepr

#: The same rule as the Postgres event backend's ``?table=`` (SPEC 3): nothing needs quoting.
TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")
_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class PgvectorSettings(MaskedRepr, BaseModel):
    """Where the rows go, how texts become vectors, and how removal is checked."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    dsn_env: str | None = Field(
        None, description="environment variable holding the PostgreSQL URL (with the password)"
    )
    dsn: str | None = Field(
        None, description="PostgreSQL URL without a password (local sockets, peer/cert auth)"
    )
    table: str = Field("agent_custody_facts", description="table name, optionally schema.table")
    dimensions: int = Field(ge=1, le=16000, description="length of every embedding")
    embed: str = Field(description='"module:function" turning a text into a list of floats')
    top_k: int = Field(10, ge=1, le=1000, description="neighbours searched to verify removal")
    distance: Literal["cosine", "l2", "inner_product"] = Field(
        "cosine", description="operator of the HNSW index and the verification search"
    )
    create: bool = Field(True, description="create the table and HNSW index if missing")
    connect_timeout: float = Field(10.0, gt=0, description="seconds to wait for a connection")
    statement_timeout: float = Field(
        30.0, gt=0, description="seconds one statement may run, lock waits included"
    )

    @field_validator("table")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        if not TABLE_NAME.fullmatch(value):
            raise ValueError(
                f'table name must be a plain identifier, optionally schema-qualified; got "{value}"'
            )
        return value

    @field_validator("embed")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not _REF.fullmatch(value):
            raise ValueError(f'embed must be "module:function"; got "{value}"')
        return value

    @field_validator("dsn")
    @classmethod
    def _no_password_in_file(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).password or "password=" in value):
            raise ValueError(
                "dsn holds a password; put the URL in an environment variable and name it "
                "in dsn_env"
            )
        return value

    @model_validator(mode="after")
    def _one_location(self) -> PgvectorSettings:
        if (self.dsn_env is None) == (self.dsn is None):
            raise ValueError("give exactly one of dsn_env (recommended) or dsn")
        return self
