"""From a ``MemoryConfig`` to a running server: secrets, stores, ledger, the startup line.

The ledger is opened on the worker thread that will serve every later ledger call, so a backend
that binds a connection to its creating thread is used from that thread only.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agent_custody_state.authconfig import OAuthConfig
from agent_custody_state.config import ConfigError, MemoryConfig, env_secret
from agent_custody_state.ledger.ledger import Ledger
from agent_custody_state.server.guard import BearerToken
from agent_custody_state.server.limits import ValueLimits
from agent_custody_state.server.oauth import OAuthSettings
from agent_custody_state.server.scopes import SpaceScope
from agent_custody_state.server.signing import SigningIdentity
from agent_custody_state.server.tokenrules import check_length
from agent_custody_state.server.warmup import Warmup, needs_warming
from agent_custody_state.server.worker import LedgerWorker
from agent_custody_state.storebuild import build_stores
from agent_custody_state.stores.archive import CertificateArchive
from agent_custody_state.stores.outbox import outbox_path

NO_FORGET_KEY_WARNING = (
    "agent-custody-memory: warning: no forget key (--forget-key-env): a forgotten value leaves "
    "a plain sha256 digest, which anyone who guesses the value can confirm"
)
PLAIN_JWKS_WARNING = (
    "agent-custody-memory: warning: [server.oauth] jwks_url is plain http:// to another host: "
    "anyone on the network path can hand this server keys and so forge access tokens; use "
    "https:// unless that path is trusted"
)
NO_OUTBOX_WARNING = (
    "agent-custody-memory: warning: the ledger is at a URL and no outbox is configured "
    '(outbox = "PATH"): store removals interrupted by a crash cannot be resumed'
)


@dataclass
class Runtime:
    """Everything resolved and opened, ready to build the server."""

    config: MemoryConfig
    ledger: Ledger
    worker: LedgerWorker
    tokens: list[BearerToken] = field(default_factory=list)
    oauth: OAuthSettings | None = None
    identity: SigningIdentity | None = None
    stores: list[Any] = field(default_factory=list)
    event_count: int = 0  # counted at open, so announcing never waits on the ledger

    def server_options(self) -> dict[str, Any]:
        return {
            "require_gateway": not self.config.server.allow_direct,
            "stores": self.stores,
            "identity": self.identity,
            "retention": self.config.retention,
            "verify": {
                "attempts": self.config.verify.attempts,
                "delay_ms": self.config.verify.delay_ms,
            },
            "worker": self.worker,
            "value_limits": ValueLimits(
                self.config.server.max_value_elements, self.config.server.max_value_bytes
            ),
            "stream_spaces": self.config.server.spaces,
            "outbox": self.outbox,
            "certificates": self.config.certificates,
            "resume_every": self.config.server.resume_every,
        }

    @property
    def outbox(self) -> Path | None:
        """Where owed store removals are kept (``stores.outbox``), if anywhere."""
        return outbox_path(self.config.ledger or "", self.config.outbox)

    def warnings(self) -> list[str]:
        """Start-up warnings beyond the startup line's own."""
        found = []
        if self.ledger.forget_key is None:
            found.append(NO_FORGET_KEY_WARNING)
        if self.stores and self.outbox is None:
            found.append(NO_OUTBOX_WARNING)
        oauth = self.config.server.oauth
        if oauth is not None and oauth.jwks_url and _plain_remote(oauth.jwks_url):
            found.append(PLAIN_JWKS_WARNING)
        return found

    created: list[Path] = field(default_factory=list)  # files this start created
    warmup: Warmup | None = None  # the chain head being computed at start-up (``warmup``)

    def close(self) -> None:
        if self.warmup is not None:
            self.warmup.stop()
        try:
            self.worker.call(self.ledger.close)
        finally:
            self.worker.close()

    def discard(self) -> None:
        """Close after a refused start, removing the files opening the ledger created (the
        ledger file itself only while it holds no event): a refused start leaves nothing."""
        self.close()
        if self.event_count:
            return
        for path in self.created:
            with contextlib.suppress(OSError):
                path.unlink()


def open_runtime(config: MemoryConfig) -> Runtime:
    """Resolve secrets and stores first (cheap failures), then open the ledger."""
    if not config.ledger:
        raise ConfigError(
            "no ledger: give --ledger, `ledger = ...` in the config file, or AGENT_CUSTODY_LEDGER"
        )
    forget_key = (
        env_secret(config.forget_key_env, "forget_key_env") if config.forget_key_env else None
    )
    tokens = [
        BearerToken(
            env_secret(t.env, f"server.tokens[{i}] ({t.role})"),
            t.role,
            f"{t.role}:{t.env}",
            SpaceScope.parse(t.spaces) if t.spaces is not None else None,
        )
        for i, t in enumerate(config.server.tokens)
    ]
    if config.server.transport == "http":  # over stdio tokens are unused (a note says so)
        for i, (t, token) in enumerate(zip(config.server.tokens, tokens, strict=True)):
            what = f"the bearer token in {t.env} (server.tokens[{i}], role {t.role})"
            try:
                check_length(token.value, what)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    oauth = oauth_settings(config.server.oauth) if config.server.oauth is not None else None
    if config.checkpoint_every and not config.key:
        raise ConfigError(
            "checkpoint_every needs key: checkpoints are signed with the key that signs results; "
            'add key = "memory.key" (make one with: agent-custody-memory keygen --out memory.key)'
        )
    if config.certificates and not config.key:
        raise ConfigError(
            "certificates needs key: erasure certificates are signed with the key that signs "
            'results; add key = "memory.key" (make one with: agent-custody-memory keygen --out '
            "memory.key)"
        )
    identity = SigningIdentity.load(config.key) if config.key else None
    if config.certificates:
        try:
            CertificateArchive(config.certificates).prepare()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    stores = build_stores(config.stores)
    before = _opened_files(config)
    worker = LedgerWorker()
    try:
        ledger = worker.call(
            Ledger,
            config.ledger,
            forget_key=forget_key,
            forget_mode=config.forget_mode,
            key_store=config.key_store,
            # Checkpoints are signed with the results' key (``docs/proofs.md``).
            checkpoint_key=config.key if config.checkpoint_every else None,
            checkpoint_every=config.checkpoint_every,
            checkpoints=config.checkpoints,
        )
    except BaseException:
        worker.close()
        for path in _opened_files(config) - before:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    worker.inline = not ledger.backend.blocking
    count = worker.call(ledger.count)
    # An original's ledger: its chain head, computed in a child process while we serve.
    warmup = (
        Warmup(ledger.backend, config.ledger)
        if worker.call(needs_warming, ledger.backend, count)
        else None
    )
    created = sorted(_opened_files(config) - before)
    return Runtime(config, ledger, worker, tokens, oauth, identity, stores, count, created, warmup)


def _plain_remote(url: str) -> bool:
    """Whether ``url`` is plain ``http://`` to a host other than this one."""
    from urllib.parse import urlsplit

    from agent_custody_state.server.http import is_loopback

    parts = urlsplit(url)
    return parts.scheme.lower() == "http" and not is_loopback(parts.hostname or "")


def oauth_settings(table: OAuthConfig) -> OAuthSettings:
    """``[server.oauth]`` as the verifier's settings; a bad combination is a ``ConfigError``."""
    given: dict[str, Any] = {}
    if table.scopes is not None:
        given["grants"] = {
            name: (g.role, SpaceScope.parse(g.spaces) if g.spaces is not None else None)
            for name, g in table.scopes.items()
        }
    if table.algorithms is not None:
        given["algorithms"] = tuple(table.algorithms)
    try:
        return OAuthSettings(
            issuer=table.issuer,
            resource=table.resource,
            jwks_file=table.jwks_file,
            jwks_url=table.jwks_url,
            space_prefix=table.space_scope_prefix,
            leeway=table.leeway,
            cache_seconds=table.jwks_cache_seconds,
            min_refresh=table.jwks_min_refresh_seconds,
            jwks_timeout=table.jwks_timeout_seconds,
            authorization_servers=tuple(table.authorization_servers),
            **given,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _opened_files(config: MemoryConfig) -> set[Path]:
    """The files opening the ledger may create: its own, and a key store given elsewhere."""
    return {p for where in (config.ledger, config.key_store) if where for p in _files_beside(where)}


def _files_beside(location: str) -> set[Path]:
    """The ledger's file and its sidecars (``<name>.lock``, ``<name>-wal``, ...), if it is a
    path: what opening it may create."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", location):
        return set()
    path = Path(location)
    if not path.parent.is_dir():
        return set()
    return {p for p in path.parent.iterdir() if p.name.startswith(path.name)}


def startup_line(runtime: Runtime, where: str) -> str:
    """One line naming the ledger, its event count and the trust mode (SPEC 5)."""
    ledger = runtime.ledger
    count = runtime.event_count
    server = runtime.config.server
    if server.transport == "http":
        roles = [t.role for t in runtime.tokens]
        counts = [
            f"{roles.count(r)} {r} token{'s' if roles.count(r) != 1 else ''}"
            for r in ("gateway", "direct", "reader")
            if r in roles
        ]
        scoped = sum(1 for t in runtime.tokens if t.spaces is not None)
        if scoped:
            counts.append(f"{scoped} limited to spaces")
        if runtime.oauth is not None:
            counts.append(f"OAuth access tokens from {runtime.oauth.issuer}")
        trust = ", ".join(counts) if counts else "no tokens, every caller is direct"
        if server.stateless:
            trust += "; stateless (no sessions, no subscriptions)"
    else:
        trust = "the spawning process is the gateway"
        if server.spaces is not None:
            trust += f" (spaces: {', '.join(server.spaces)})"
    direct = (
        "direct calls admitted as claimed (quarantined)"
        if server.allow_direct
        else "calls without a receipt are refused"
    )
    if server.transport == "http" and not (runtime.tokens or runtime.oauth or server.allow_direct):
        direct += (  # then every call is refused: say how to be reachable
            ", so every call is refused: add --token-env NAME (a gateway's bearer token), or "
            "--allow-direct to accept direct callers quarantined"
        )
    parts = [
        f"ledger {ledger.location} ({ledger.backend.kind}, {count} events)",
        f"serving {where}",
        f"trust: {trust}; {direct}",
    ]
    parts += _mode_parts(ledger)
    if runtime.stores:
        parts.append("stores: " + ", ".join(s.name for s in runtime.stores))
    if runtime.identity is not None:
        parts.append(f"signing results (key {runtime.identity.key_id[:16]})")
    typo = suffix_typo(runtime.config.ledger or "", ledger.backend.kind)
    if typo:
        parts.append(f"warning: {typo}")
    if runtime.config.checkpoint_every:
        parts.append(f"chain checkpoints every {runtime.config.checkpoint_every} events")
    return "agent-custody-memory: " + "; ".join(parts)


def _mode_parts(ledger: Ledger) -> list[str]:
    """The forget mode, and a warning when the mode recorded with the ledger (``modemark``)
    disagrees: a plain-mode server on a crypto-shred ledger refuses every value, and one whose
    key store is not the recorded one cannot forget the facts whose keys are in the other."""
    mark = ledger.backend.recorded_forget_mode()
    if ledger.forget_mode != "crypto-shred":
        if mark is None or mark.mode != "crypto-shred":
            return []
        return [
            "warning: the ledger is written in crypto-shred mode (keys "
            f"{mark.key_store or '?'}) and this server is not: it will refuse to write values "
            '(set forget_mode = "crypto-shred")'
        ]
    keys = ledger.backend.keystore()
    parts = [f"forget: crypto-shred (keys {keys.location})"]
    if mark is not None and mark.key_store and mark.key_store != keys.location:
        parts.append(
            f"warning: the ledger records its keys in {mark.key_store}, this server uses "
            f"{keys.location}: a fact written through one cannot be forgotten through the other"
        )
    return parts


def suffix_typo(location: str, kind: str) -> str | None:
    """A warning when a path's suffix looks like a misspelt backend suffix (``.sqlit``,
    ``.jsnl``): such a path silently gets the fallback backend (JSONL), not the one meant."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", location):
        return None
    suffix = Path(location).suffix.lower()
    from agent_custody_state.plugins import get_plugin_manager

    known = {s for spec in get_plugin_manager().backends.values() for s in spec.suffixes}
    known |= {".jsonl", ".sqlite", ".db"}  # what SPEC 3 routes, installed or not
    if not suffix or suffix in known:
        return None
    close = difflib.get_close_matches(suffix, sorted(known), n=1, cutoff=0.6)
    if not close:
        return None
    meant = next(
        (s.name for s in get_plugin_manager().backends.values() if close[0] in s.suffixes),
        "sqlite" if close[0] in (".sqlite", ".db") else "jsonl",
    )
    if meant == kind:
        return None  # ".json" for ".jsonl": the backend meant is the one used
    return (
        f"{location} ends in {suffix}, not {close[0]}: it is opened as a {kind} ledger; "
        f"rename it if you meant {close[0]}"
    )


def announce(runtime: Runtime, where: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    print(startup_line(runtime, where), file=stream, flush=True)
    for warning in runtime.warnings():
        print(warning, file=stream, flush=True)
