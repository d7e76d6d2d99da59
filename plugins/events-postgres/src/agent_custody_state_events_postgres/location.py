"""Parsing a ``postgres://`` ledger location: our parameters out, the password hidden.

``?table=`` (optionally ``schema.table``), ``?vacuum=``, ``?lock=`` and ``?commit=`` belong to the
ledger, not to libpq, so they are removed before connecting; every other parameter (``host=`` for a Unix socket,
``sslmode=``, ...) is passed through. The display form replaces the password, in the userinfo
and in a ``password=`` parameter, with ``***``. The user name and password are read once, here,
and handed to both drivers percent-encoded again (a location SQLAlchemy would read otherwise is
refused without being shown); a Unix-socket directory written as the host, percent-encoded,
becomes ``host=``. ``fits`` refuses table names PostgreSQL would cut to 63 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from sqlalchemy.engine import make_url

from agent_custody_state_sql import TABLE_NAME
from agent_custody_state_sql.schema import INDEXES

#: PostgreSQL cuts every identifier to this many bytes (``NAMEDATALEN - 1``).
MAX_IDENTIFIER = 63

_FALSE = {"false", "0", "no", "off"}
_TRUE = {"true", "1", "yes", "on"}
_MASK = "***"


class LocationError(ValueError):
    """A Postgres location that cannot be used; the message says which part and why."""


@dataclass(frozen=True)
class PostgresLocation:
    """What a location means: where to connect, which table, whether to VACUUM FULL. Its
    ``repr`` shows ``display`` (the password masked), not ``connect_url``."""

    connect_url: str = field(repr=False)
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


@dataclass(frozen=True)
class Reader:
    """Opens another connection to the ledger in autocommit mode; picklable (the chunks
    ``verify``'s workers read themselves: ``SqlEventBackend._reader``). Its ``repr`` (a chunk's,
    in a traceback or a debugger) shows ``display``, the location with its password masked,
    not the libpq URL it connects with (a ``functools.partial`` showed that one)."""

    url: str = field(repr=False)
    display: str
    connect_timeout: int

    def __call__(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)


def reader(where: PostgresLocation, connect_timeout: int) -> Reader:
    """The ``Reader`` of the ledger at ``where``."""
    return Reader(libpq_url(where.connect_url), where.display, connect_timeout)


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


#: Why a location's credentials are refused; names no part of the location, which may hold them.
_UNREADABLE = (
    "postgres: the location cannot be read unambiguously as a URL (it is not shown: it may hold "
    "a password); percent-encode '@' as %40, ':' as %3A, '/' as %2F, '?' as %3F, '#' as %23 and "
    "'%' as %25 in the user name and password, and check the port"
)


def _socket_host(hostport: str, passthrough: list[tuple[str, str]]) -> str:
    """``hostport`` unless its host is a Unix-socket directory written percent-encoded, as
    libpq documents it (``postgresql://%2Fvar%2Frun%2Fpostgresql/db``), which SQLAlchemy
    would look up as a host name: then it moves to ``host=`` (its port to ``port=``), and
    nothing is left of it."""
    host, colon, port = hostport.partition(":")
    if not host.lower().startswith("%2f") or any(key == "host" for key, _ in passthrough):
        return hostport
    passthrough.append(("host", unquote(host)))
    if colon and port:
        passthrough.append(("port", port))
    return ""


def _netloc(parts: SplitResult, passthrough: list[tuple[str, str]]) -> str:
    """``parts``' netloc with the user name and password as this module reads them (the last
    ``@`` ends them, as in ``display``) percent-encoded again, so that SQLAlchemy and libpq
    (``reader``) read the same ones: a raw ``@`` or ``%`` in a password then works. A socket
    directory as the host moves to ``passthrough`` (``_socket_host``)."""
    _userinfo, at, hostport = parts.netloc.rpartition("@")
    hostport = _socket_host(hostport, passthrough)
    if not at:
        return hostport
    encoded = quote(unquote(parts.username or ""), safe="")
    if parts.password is not None:
        encoded += ":" + quote(unquote(parts.password), safe="")
    return f"{encoded}@{hostport}"


def _check_credentials(parts: SplitResult, connect: str) -> None:
    """Refuse a location whose credentials SQLAlchemy (which connects) reads otherwise than
    this module (which hides them): a raw ``/``, ``?`` or ``#`` in a password ends the
    authority here but not there, so the password would be shown in ``display`` or echoed in
    the driver's errors. The message shows no part of the location."""
    try:
        theirs = make_url(connect)
    except Exception:
        if "@" in parts.netloc or ":" not in parts.netloc:
            return  # credentials read (and hidden) here, or none: the driver's error follows
        # No userinfo read here: a "port" it cannot parse may be a password, quoted in its error.
        raise LocationError(_UNREADABLE) from None
    user = None if parts.username is None else unquote(parts.username)
    password = None if parts.password is None else unquote(parts.password)
    if (theirs.username or None, theirs.password or None) != (user or None, password or None):
        raise LocationError(_UNREADABLE)


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
    query = list(passthrough)  # to connect with; the display shows the location's own
    netloc = _netloc(parts, query)
    # SQLAlchemy 2.0 maps a bare postgresql:// to psycopg2; name the psycopg 3 driver.
    connect = urlunsplit(
        ("postgresql+psycopg", netloc, parts.path, urlencode(query), parts.fragment)
    )
    _check_credentials(parts, connect)
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


def fits(where: PostgresLocation) -> PostgresLocation:
    """``where``, if PostgreSQL keeps the names of its table apart. It cuts identifiers to
    ``MAX_IDENTIFIER`` bytes without an error, so a longer schema or table name is the name of
    another table (two ledgers in one), and a long table name makes two of SPEC 3's index names
    one (``CREATE INDEX IF NOT EXISTS`` then skips the second: a ledger without it)."""
    for part in (where.schema, where.table):
        if part is not None and len(part.encode()) > MAX_IDENTIFIER:
            raise LocationError(
                f'postgres: "{part}" is longer than {MAX_IDENTIFIER} bytes; PostgreSQL would cut '
                f'it to "{part[:MAX_IDENTIFIER]}", which may be another ledger\'s table'
            )
    prefix = where.qualified.replace(".", "_")
    names = {f"{prefix}_{suffix}"[:MAX_IDENTIFIER] for suffix in INDEXES} | {where.table}
    if len(names) != len(INDEXES) + 1:
        limit = MAX_IDENTIFIER - len("_sub")
        raise LocationError(
            f'postgres: table name "{where.qualified}" is too long for its index names, which '
            f"PostgreSQL cuts to {MAX_IDENTIFIER} bytes (two would become one); keep "
            f'"{prefix}" within {limit} characters'
        )
    return where
