"""OAuth 2.1 resource server: JWT access tokens from an authorization server (issue 13 section 3).

The MCP authorization spec makes an HTTP MCP server an OAuth *resource server*: it publishes
where its tokens come from (RFC 9728 protected resource metadata, ``metadata()``) and checks
each access token it is handed. ``JwtVerifier.verify`` checks, with PyJWT:

- the signature, with a key from the issuer's JWKS (a file, or a URL fetched with a short
  timeout and cached: ``jwks.py``; an unknown ``kid`` refetches at once, at most once every
  ``min_refresh`` seconds, so a flood of made-up key ids cannot turn the server into a
  JWKS-fetching loop);
- the algorithm: only the asymmetric ones configured (never ``none``, never an HMAC one, so a
  public key can never be used as an HMAC secret);
- ``iss`` (the issuer), ``aud`` (this server's resource URL), ``exp`` and ``nbf`` with a small
  leeway for clock skew; ``exp`` must be present.

The token's scopes (``scope``, space separated, or an ``scp`` list) map to a role through the
configured grants (the most trusted role granted wins: gateway, then direct, then reader) and to
space scopes: ``space:<pattern>`` scopes plus the own ``spaces`` of the grants of that role (a
lower grant's spaces are dropped, never lent to the higher role); none of either leaves the
token unscoped. A token granting no role is *insufficient_scope* (403). The token itself is
kept nowhere: only its principal (issuer, subject, client) and what it grants go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from jwt import PyJWK

from agent_custody_state.server.jwks import JwksCache, JwksError
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.trust import ROLES, Role

#: The algorithms a token may be signed with: asymmetric only.
ASYMMETRIC: tuple[str, ...] = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
ASYMMETRIC += ("ES256", "ES384", "ES512", "EdDSA")
DEFAULT_GRANTS: dict[str, tuple[Role, SpaceScope | None]] = {
    "memory:gateway": ("gateway", None),
    "memory:write": ("direct", None),
    "memory:read": ("reader", None),
}
MIN_REFRESH = 10.0  # seconds between two JWKS fetches caused by unknown key ids
_TRUST = {"gateway": 3, "direct": 2, "reader": 1}


class InvalidToken(Exception):
    """The token is not one this server accepts (401 ``invalid_token``); the message says why
    without echoing the token."""


class InsufficientScope(Exception):
    """A valid token that grants no role here (403 ``insufficient_scope``)."""


@dataclass(frozen=True)
class OAuthSettings:
    """``[server.oauth]``, resolved: see ``config.OAuthConfig`` for the keys."""

    issuer: str
    resource: str
    jwks_file: str | None = None
    jwks_url: str | None = None
    grants: Mapping[str, tuple[Role, SpaceScope | None]] = field(
        default_factory=lambda: dict(DEFAULT_GRANTS)
    )
    space_prefix: str = "space:"
    algorithms: tuple[str, ...] = ASYMMETRIC
    leeway: float = 30.0
    cache_seconds: float = 300.0
    min_refresh: float = MIN_REFRESH
    jwks_timeout: float = 5.0
    authorization_servers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.jwks_file is None) == (self.jwks_url is None):
            raise ValueError("server.oauth: give exactly one of jwks_file and jwks_url")
        bad = [a for a in self.algorithms if a not in ASYMMETRIC]
        if bad or not self.algorithms:
            raise ValueError(
                f"server.oauth.algorithms: only asymmetric algorithms ({', '.join(ASYMMETRIC)}); "
                f"not {', '.join(bad) or 'an empty list'}"
            )
        if self.jwks_timeout <= 0 or self.min_refresh < 0:
            raise ValueError("server.oauth: the JWKS timeout must be positive")
        if not self.resource.startswith(("https://", "http://")):
            raise ValueError("server.oauth.resource: this server's URL, as https://host/mcp")
        for name, (role, _spaces) in self.grants.items():
            if role not in ROLES:
                raise ValueError(f"server.oauth.scopes.{name}: unknown role {role!r}")

    @property
    def metadata_path(self) -> str:
        """Where RFC 9728 puts this resource's metadata (the resource's path appended)."""
        path = httpx.URL(self.resource).path.rstrip("/")
        return "/.well-known/oauth-protected-resource" + path

    @property
    def metadata_url(self) -> str:
        url = httpx.URL(self.resource)
        return str(url.copy_with(path=self.metadata_path, query=None, fragment=None))

    def scopes_supported(self) -> list[str]:
        return sorted(self.grants)

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 section 2)."""
        return {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers or (self.issuer,)),
            "scopes_supported": self.scopes_supported(),
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": list(self.algorithms),
            "resource_name": "agent-custody-memory",
        }


@dataclass(frozen=True)
class Principal:
    """Who a valid access token speaks for, and what it grants (never the token)."""

    issuer: str
    subject: str
    client_id: str
    role: Role
    spaces: SpaceScope | None

    @property
    def label(self) -> str:
        """Names the principal in the guard, which binds MCP sessions to it: a ``/`` in the
        subject is escaped, so subject ``a/b`` is never subject ``a`` of client ``b``."""
        subject = self.subject.replace("%", "%25").replace("/", "%2F")
        return f"oauth:{subject}" + (f"/{self.client_id}" if self.client_id else "")


class JwtVerifier:
    """Checks access tokens (see the module docstring)."""

    def __init__(self, settings: OAuthSettings, jwks: JwksCache | None = None) -> None:
        self.settings = settings
        self.jwks = jwks or JwksCache(
            file=settings.jwks_file,
            url=settings.jwks_url,
            cache_seconds=settings.cache_seconds,
            min_refresh=settings.min_refresh,
            timeout=settings.jwks_timeout,
        )

    async def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("not a JWT access token") from None
        alg = header.get("alg")
        if alg not in self.settings.algorithms:
            raise InvalidToken(f"signing algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        try:
            data = await self.jwks.key_data(kid if isinstance(kid, str) else None)
        except JwksError as exc:
            raise InvalidToken(str(exc)) from None
        try:
            key = PyJWK(data, algorithm=alg)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.settings.resource,
                issuer=self.settings.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token was not issued for this resource") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token comes from another issuer") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise InvalidToken(f"the token is not valid: {type(exc).__name__}") from None
        return self.principal(claims)

    def principal(self, claims: Mapping[str, Any]) -> Principal:
        scopes = _scopes(claims)
        granted = [self.settings.grants[s] for s in scopes if s in self.settings.grants]
        if not granted:
            raise InsufficientScope("the token grants none of this server's scopes")
        role = max((r for r, _ in granted), key=lambda r: _TRUST[r])
        patterns = [s[len(self.settings.space_prefix) :] for s in scopes if self._space(s)]
        for grant_role, spaces in granted:
            # Only the winning role's grants: a lower grant's spaces (reader in team:b) must
            # not let the higher role (direct in team:a) act there.
            if grant_role == role and spaces is not None:
                patterns.extend(spaces.patterns)
        try:
            spaces = SpaceScope.parse(patterns, what="token scopes") if patterns else None
        except ValueError as exc:
            raise InvalidToken(str(exc)) from None
        return Principal(
            issuer=str(claims.get("iss", "")),
            subject=str(claims.get("sub", "")),
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            role=role,
            spaces=spaces,
        )

    def _space(self, scope: str) -> bool:
        prefix = self.settings.space_prefix
        return bool(prefix) and scope.startswith(prefix) and len(scope) > len(prefix)


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return value.split()
    if isinstance(value, Sequence):
        return [s for s in value if isinstance(s, str)]
    return []
