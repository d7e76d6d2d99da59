"""Who may call the HTTP server: ``[[server.tokens]]`` and ``[server.oauth]`` (docs/security.md).

Pydantic models only; ``config.py`` puts them in ``[server]``, ``server/runtime.py`` turns them
into the guard's tokens and the OAuth resource server's settings. Space patterns are checked
here, at load time, by the same parser the server uses.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_custody_state.maskedrepr import MaskedRepr
from agent_custody_state.spaces import SpaceScope

RoleName = Literal["gateway", "direct", "reader"]


def check_spaces(value: list[str] | None) -> list[str] | None:
    if value is not None:
        SpaceScope.parse(value)
    return value


class TokenConfig(BaseModel):
    """``[[server.tokens]]``: the variable holding a bearer token, its holder's role and
    (optionally) the spaces it may use: exact names or ``prefix*``."""

    model_config = ConfigDict(extra="forbid")
    env: str = Field(min_length=1)
    role: RoleName = "gateway"
    spaces: list[str] | None = None

    _check_spaces = field_validator("spaces")(check_spaces)


class OAuthGrantConfig(BaseModel):
    """``[server.oauth.scopes."<scope>"]``: what a token carrying that scope gets."""

    model_config = ConfigDict(extra="forbid")
    role: RoleName
    spaces: list[str] | None = None

    _check_spaces = field_validator("spaces")(check_spaces)


class OAuthConfig(MaskedRepr, BaseModel):
    """``[server.oauth]``: accept JWT access tokens from one authorization server."""

    model_config = ConfigDict(extra="forbid")
    issuer: str = Field(min_length=1)
    #: this server's URL as clients reach it (``https://memory.example.com/mcp``); the audience
    resource: str = Field(min_length=1)
    jwks_file: str | None = None
    jwks_url: str | None = None
    #: scope -> grant; unset: memory:gateway, memory:write (direct), memory:read (reader)
    scopes: dict[str, OAuthGrantConfig] | None = None
    space_scope_prefix: str = "space:"
    algorithms: list[str] | None = None
    leeway: float = Field(default=30, ge=0, le=300)
    jwks_cache_seconds: float = Field(default=300, gt=0)
    #: longest wait for the JWKS URL; a request never waits longer for a key
    jwks_timeout_seconds: float = Field(default=5, gt=0, le=60)
    #: fewest seconds between two fetches caused by unknown key ids or after a failed fetch
    jwks_min_refresh_seconds: float = Field(default=10, ge=0, le=3600)
    authorization_servers: list[str] = Field(default_factory=list)
