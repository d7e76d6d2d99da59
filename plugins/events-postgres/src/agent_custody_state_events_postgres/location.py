"""Parsing a ``postgres://`` ledger location: our parameters out, the password hidden.

``?table=`` (optionally ``schema.table``), ``?vacuum=``, ``?lock=`` and ``?commit=`` belong to the
ledger, not to libpq, so they are removed before connecting; every other parameter (``host=`` for a Unix socket,
``sslmode=``, ...) is passed through. The display form replaces the password, in the userinfo
and in a ``password=`` parameter, with ``***``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agent_custody_state_sql import TABLE_NAME

_FALSE = {"false", "0", "no", "off"}
_TRUE = {"true", "1", "yes", "on"}
_MASK = "***"


class LocationError(ValueError):
    """A Postgres location that cannot be used; the message says which part and why."""


@dataclass(frozen=True)
class PostgresLocation:
    """What a location means: where to connect, which table, whether to VACUUM FULL."""

    connect_url: str
    display: str
    table: str
    schema: str | None
    vacuum: bool
    #: ``"keys"`` (advisory locks per write key, the default) or ``"table"`` (every write
    #: section takes ``LOCK TABLE``: the write path before issue 15, kept for comparison and for
    #: tables that writers outside this code also insert into)
    lock: str = "keys"
    #: ``"grouped"`` (the default: a keyed section commits without waiting for its WAL flush,
    #: releasing the order lock, then waits for a later durable commit, which the server can
    #: group with other writers' flushes) or ``"sync"`` (the flush happens inside the section,
    #: under the order lock: one flush per write, and no window in which another session can
    #: read a write that is not durable yet). See docs/scale-out.md.
    commit: str = "grouped"

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.schema else self.table


def libpq_url(url: str) -> str:
    """A ``connect_url`` (SQLAlchemy's ``postgresql+psycopg://``) as libpq reads it."""
    return "postgresql://" + url.split("://", 1)[1]


def reader(where: PostgresLocation, connect_timeout: int) -> Callable[[], Any]:
    """What opens another connection to the ledger in autocommit mode, picklable (the chunks
    ``verify``'s workers read themselves: ``SqlEventBackend._reader``)."""
    import psycopg

    return partial(
        psycopg.connect,
        libpq_url(where.connect_url),
        autocommit=True,
        connect_timeout=connect_timeout,
    )


def _secret(key: str) -> bool:
    """A connection parameter whose value is a secret: ``password``, ``sslpassword`` (the client
    key's passphrase), and anything else naming a password, secret or token."""
    lowered = key.lower()
    return any(word in lowered for word in ("password", "secret", "token"))


def _mask_netloc(netloc: str) -> str:
    userinfo, at, hostport = netloc.rpartition("@")
    if not at:
        return netloc
    user, colon, _password = userinfo.partition(":")
    return f"{user}:{_MASK}@{hostport}" if colon else netloc


def parse_location(location: str) -> PostgresLocation:
    """Split a ``postgres[ql]://`` location into connection URL, display string and options."""
    parts = urlsplit(location)
    if parts.scheme.lower() not in ("postgres", "postgresql"):
        raise LocationError(
            f"postgres: expected a postgres:// or postgresql:// URL; got "
            f"{parts.scheme or 'no'} scheme"
        )
    table = "events"
    vacuum = True
    lock = "keys"
    commit = "grouped"
    passthrough: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "table":
            table = value
        elif key == "vacuum":
            lowered = value.lower()
            if lowered not in _TRUE | _FALSE:
                raise LocationError(f'postgres: vacuum must be true or false; got "{value}"')
            vacuum = lowered in _TRUE
        elif key == "lock":
            if value not in ("keys", "table"):
                raise LocationError(f'postgres: lock must be keys or table; got "{value}"')
            lock = value
        elif key == "commit":
            if value not in ("grouped", "sync"):
                raise LocationError(f'postgres: commit must be grouped or sync; got "{value}"')
            commit = value
        else:
            passthrough.append((key, value))
    if not TABLE_NAME.fullmatch(table):
        raise LocationError(
            "postgres: table name must be a plain identifier, optionally schema-qualified; "
            f'got "{table}"'
        )
    schema, _, name = table.rpartition(".")
    # SQLAlchemy 2.0 maps a bare postgresql:// to psycopg2; name the psycopg 3 driver.
    connect = urlunsplit(
        ("postgresql+psycopg", parts.netloc, parts.path, urlencode(passthrough), parts.fragment)
    )
    shown_query = [(k, _MASK if _secret(k) else v) for k, v in passthrough]
    if table != "events":
        shown_query.append(("table", table))
    if not vacuum:
        shown_query.append(("vacuum", "false"))
    if lock != "keys":
        shown_query.append(("lock", lock))
    if commit != "grouped":
        shown_query.append(("commit", commit))
    display = urlunsplit(
        (
            parts.scheme,
            _mask_netloc(parts.netloc),
            parts.path,
            urlencode(shown_query, safe="/*"),
            "",
        )
    )
    return PostgresLocation(connect, display, name, schema or None, vacuum, lock, commit)
