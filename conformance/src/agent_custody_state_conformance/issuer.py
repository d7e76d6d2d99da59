"""A local OAuth issuer for tests: a key pair, its JWKS (a file or a loopback URL), JWTs.

An authorization server's signing side, with nothing mocked: RSA keys made with
``cryptography``, access tokens signed with PyJWT exactly as an authorization server signs
them, the public keys published as a JWKS document::

    issuer = LocalIssuer(tmp_path)                 # writes tmp_path / "jwks.json"
    token = issuer.token("http://127.0.0.1:8790/mcp", scope="memory:write space:team:a")
    with JwksServer(issuer) as jwks:               # the same keys at jwks.jwks_url
        ...
    issuer.rotate()                                # a new signing key, published beside the old

``JwksServer`` is a ``FakeVendorServer``: ``fail`` answers 500, ``requests_for("jwks")`` counts
the fetches.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from .fakeserver.messages import Handler, Reply, Request, json_reply
from .fakeserver.server import FakeVendorServer

__all__ = ["JwksServer", "LocalIssuer"]

DEFAULT_ISSUER = "https://issuer.test"


class LocalIssuer:
    """Signs access tokens; ``jwks`` is the public JWKS file (rewritten on ``rotate``)."""

    def __init__(self, folder: Path, issuer: str = DEFAULT_ISSUER, *, name: str = "jwks") -> None:
        self.issuer = issuer
        self.jwks = Path(folder) / f"{name}.json"
        self._published: list[dict[str, Any]] = []
        self.rotate()

    def rotate(self, *, keep_old: bool = True) -> str:
        """A new signing key (its ``kid`` returned), published with the old ones unless
        ``keep_old`` is false."""
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        entry = {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}
        self._published = [*(self._published if keep_old else []), entry]
        self.jwks.write_text(json.dumps(self.document()))
        return self.kid

    def document(self) -> dict[str, Any]:
        """The JWKS document: every published public key."""
        return {"keys": list(self._published)}

    def token(self, audience: str, *, kid: str | None = None, **claims: Any) -> str:
        """A JWT for ``audience`` (``sub`` alice, five minutes); ``claims`` add or replace
        claims (``scope="memory:read"``, ``exp=...``); a claim given as None is left out."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience,
            "sub": "alice",
            "iat": now,
            "exp": now + 300,
        }
        body.update(claims)
        clean = {k: v for k, v in body.items() if v is not None}
        headers = {"kid": kid or self.kid}
        return jwt.encode(clean, self.key, algorithm="RS256", headers=headers)


class JwksServer(FakeVendorServer):
    """The issuer's JWKS at ``jwks_url`` over loopback HTTP, always its current keys."""

    vendor = "issuer"

    def __init__(self, issuer: LocalIssuer) -> None:
        super().__init__(api_key=None)
        self.issuer = issuer

    def routes(self) -> Iterable[tuple[str, str, str, Handler]]:
        return [("GET", "/.well-known/jwks.json", "jwks", self._jwks)]

    def _jwks(self, request: Request, params: dict[str, str]) -> Reply:
        return json_reply(200, self.issuer.document())

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/.well-known/jwks.json"

    @property
    def fetches(self) -> int:
        return len(self.requests_for("jwks"))
