"""Bounds on a PostgreSQL server that stops answering: no call waits on it forever.

A server that is stopped (``SIGSTOP``, a frozen VM), partitioned away, or a port that accepts and
never answers left every call of the ledger waiting without end, holding the backend's lock (so
every other thread of the process waited too): only the connect was bounded
(``connect_timeout``). Now:

* ``operation_timeout`` (backend option, seconds, default ``DEFAULT_OPERATION_TIMEOUT``; 0: no
  bound): every wait of the connection for the server (a statement, a commit, a ``COPY``, the
  durability wait) ends after that long. The connection is then closed, never reused (its
  protocol state is unknown), and the call fails with an ``EventBackendError`` naming the bound.
  A write section cut off before its ``COMMIT`` was sent wrote nothing (the server rolls back a
  transaction whose client went away); one cut off at its ``COMMIT`` says it may or may not have
  been recorded (``SqlConnection._finish``). The next call opens a new connection.
* ``verify``'s own connections (``BoundedReader``, opened in its worker processes or in this
  one) have the same bound and keepalives: a server that stops answering fails ``verify``
  instead of leaving it waiting forever on a chunk.
* The crypto-shred key store's connection (``keystore``) and the erasure log's own one
  (``erasurelog``) are opened by ``open_bounded`` with the backend's ``bounds``: the same
  ``connect_timeout``, keepalives and bound, the connection replaced by the next call.
* TCP keepalives and ``tcp_user_timeout`` on by default (``KEEPALIVES``), so a dead peer or a
  partition is noticed by the kernel even inside a long statement; a parameter of the same name
  in the location's URL wins. (They do not apply to a Unix socket, nor notice a stopped server
  process, whose kernel still answers: that is ``operation_timeout``'s case.)

Server-side limits (``statement_timeout``, ``lock_timeout``) are the server's (``limits``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import parse_qsl, urlsplit

import psycopg
import sqlalchemy as sa
from psycopg import errors

from .location import Reader

#: Seconds one wait for the server may last by default: far above any statement of a ledger's
#: (an indexed lookup, an append), above a ``VACUUM FULL`` of a large table on most servers.
DEFAULT_OPERATION_TIMEOUT = 300.0

#: libpq parameters set unless the location sets them: probe an idle connection after 30 s, every
#: 10 s, give up after 3 unanswered probes; drop one whose sent data stays unacknowledged 60 s.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,  # milliseconds
}


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within ``operation_timeout``; the connection is closed."""


def operation_timeout(value: object) -> float:
    """``value`` as the operation bound: a number of seconds, 0 for none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"operation_timeout must be a number of seconds; got {value!r}")
    if math.isnan(value) or value < 0:
        raise ValueError(f"operation_timeout must be 0 (no bound) or more seconds; got {value!r}")
    return float(value)


def connect_args(url: str, connect_timeout: int) -> dict[str, Any]:
    """The driver's connect arguments: ``connect_timeout`` and the keepalive defaults that the
    location's own parameters do not set."""
    given = {key for key, _ in parse_qsl(urlsplit(url).query)}
    defaults = {k: v for k, v in KEEPALIVES.items() if k not in given}
    return {"connect_timeout": connect_timeout, **defaults}


def bound(raw: Any, seconds: float) -> None:
    """Make every wait of the psycopg connection ``raw`` end after ``seconds`` (0: unbounded)
    with ``NoAnswer``, the connection closed."""
    if not seconds:
        return
    inner: Callable[..., Any] = raw.wait

    def wait(gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit = seconds if timeout is None else min(timeout, seconds)
        try:
            return inner(gen, interval, limit)
        except errors._WaitTimeout:
            if timeout is not None and timeout < seconds:
                raise  # the caller's own, shorter timeout
            raw.pgconn.finish()  # mid-protocol: never reused; the server sees the client go
            raise NoAnswer(
                f"no answer from the server within operation_timeout={seconds:g}s (the server "
                "is stopped, unreachable or overloaded, or a lock or VACUUM FULL took longer); "
                "the connection was closed. Check the server, or open with a larger "
                "operation_timeout (seconds; 0: no bound)"
            ) from None

    raw.wait = wait


def open_bounded(url: str, connect_timeout: int, seconds: float) -> psycopg.Connection[Any]:
    """A psycopg connection to the libpq ``url`` in autocommit mode, with ``connect_timeout``,
    the keepalive defaults (``connect_args``) and every wait ``bound`` by ``seconds``."""
    raw = psycopg.connect(url, autocommit=True, **connect_args(url, connect_timeout))
    bound(raw, seconds)
    return raw


def install(engine: sa.Engine, seconds: float) -> None:
    """``bound`` every connection ``engine`` opens (the first, and every reconnect)."""
    sa.event.listen(engine, "connect", lambda raw, _record: bound(raw, seconds))


@dataclass(frozen=True)
class BoundedReader:
    """The location's ``Reader`` (``verify``'s chunk connections), its connections opened with
    the keepalive defaults (``connect_args``) and ``bound`` by ``seconds``; picklable, and shown
    as the ``Reader`` is (its password masked)."""

    reader: Reader
    seconds: float

    def __call__(self) -> Any:
        return open_bounded(self.reader.url, self.reader.connect_timeout, self.seconds)


class Bounds(TypedDict):
    """A backend's bounds, for the other connections it makes (key store, erasure log)."""

    connect_timeout: int
    operation_timeout: float


class Bounded:
    """The backend's side: a ``NoAnswer`` is failed at once, never retried on a new connection
    (``SqlConnection._gave_up``); ``bounds`` are its own, for the connections of its key store
    and erasure log."""

    _connect_timeout: int
    _bound: float

    def bounds(self) -> Bounds:
        return {"connect_timeout": self._connect_timeout, "operation_timeout": self._bound}

    def _gave_up(self, exc: BaseException) -> bool:
        return isinstance(exc, NoAnswer) or isinstance(getattr(exc, "orig", None), NoAnswer)
