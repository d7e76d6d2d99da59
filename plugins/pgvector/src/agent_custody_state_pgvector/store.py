"""The pgvector store: one row per fact in a ``vector(n)`` table, removal checked by search.

Table (created if missing, with an HNSW index on the embedding)::

    id text PRIMARY KEY          -- the fact id, so a put is an upsert and ids never collide
    text text NOT NULL           -- "<subject> <predicate>: <value>" (SPEC 6)
    embedding vector(n) NOT NULL -- embed(text)
    metadata jsonb NOT NULL      -- the custody metadata
    created_at timestamptz NOT NULL DEFAULT now()

Removal is ``DELETE ... WHERE id``; ``held_ids`` (the copies a failed put may have left) selects
by the id and by ``metadata->>'factId'``; verification reads by id and then re-embeds the text and
checks the id is not among the ``top_k`` nearest neighbours, which is what a retrieval would
return. psycopg 3 is synchronous here and runs in worker threads (``storekit.call_sdk``), so the
store works from any event loop; connections are reused through a small idle list whose
failures surface with the driver's own message (a pool's "timed out" would hide it), and an idle
connection the server dropped is replaced once, transparently (every statement is idempotent).
Each statement is bounded by ``statement_timeout`` (the call runs in a thread nobody can cancel).

A put whose connection broke before the server answered may still commit: a backend waiting for
a lock does not notice its client is gone, and inserts once the lock is free, up to
``statement_timeout`` after the statement started. So ``held_ids`` for that fact first waits out
that bound (in this process; ``_Landing``), then looks: the row is there or it never will be.
Each session also sets ``client_connection_check_interval`` (PostgreSQL 14+), so a statement
whose client closed its socket (the process ended) is cancelled rather than committed later, by
the time a restarted store looks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb

from agent_custody_state.plugin import (
    Fact,
    StoreError,
    call_sdk,
    custody_metadata,
    embedding_provider,
    fact_text,
    postgres_table,
    resolve_ref,
    secret_from_env,
)

from .settings import PgvectorSettings

Embedder = Callable[[str], Sequence[float]]
T = TypeVar("T")

#: distance setting -> (operator, HNSW operator class)
_DISTANCES = {
    "cosine": ("<=>", "vector_cosine_ops"),
    "l2": ("<->", "vector_l2_ops"),
    "inner_product": ("<#>", "vector_ip_ops"),
}
_MAX_IDLE = 4
#: How often a running statement checks its client is still connected (PostgreSQL 14+).
CLIENT_CHECK_INTERVAL = "1s"
#: Slack past ``statement_timeout`` for the statement's way to the server and its commit.
_LANDING_SLACK = 0.5


class _Landing:
    """When an INSERT sent without an answer may still commit, per fact id (this process)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def note(self, fact_id: str, until: float) -> None:
        with self._lock:
            self._until[fact_id] = max(until, self._until.get(fact_id, until))

    def wait(self, fact_id: str) -> None:
        """Sleep until no INSERT of ``fact_id`` sent without an answer can still commit."""
        with self._lock:
            until = self._until.pop(fact_id, None)
        if until is not None:
            time.sleep(max(0.0, until - time.monotonic()))


class _Connections:
    """Reusable autocommit connections: take one, give it back unless it broke."""

    def __init__(
        self, dsn: str, timeout: float, prepare: Callable[[psycopg.Connection[Any]], None]
    ):
        self._dsn = dsn
        self._timeout = max(1, round(timeout))  # libpq takes whole seconds
        self._prepare = prepare
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()

    def _take(self) -> tuple[bool, psycopg.Connection[Any]]:
        with self._lock:
            if self._idle:
                return True, self._idle.pop()
        conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=self._timeout)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return False, conn

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if not conn.closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on a connection. An idle connection the server dropped meanwhile (a
        restart, an idle timeout) is replaced once: every statement here is idempotent."""
        for attempt in (1, 2):
            reused, conn = self._take()
            try:
                result = work(conn)
            except psycopg.OperationalError as exc:
                conn.close()
                # A statement that timed out is not a dropped connection: do not wait twice.
                if reused and attempt == 1 and not isinstance(exc, psycopg.errors.QueryCanceled):
                    continue
                raise
            except BaseException:
                conn.close()  # its state is unknown; a fresh one is cheap
                raise
            self._give(conn)
            return result
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PgvectorStore:
    """A ``Store`` over one pgvector table."""

    def __init__(
        self,
        name: str,
        dsn: str,
        embed: Embedder,
        *,
        dimensions: int,
        table: str = "agent_custody_facts",
        top_k: int = 10,
        distance: str = "cosine",
        create: bool = True,
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
    ) -> None:
        self.name = name
        self.table = table
        self.dimensions = dimensions
        self.top_k = top_k
        self.create = create
        self.statement_timeout = statement_timeout
        self._embed = embed
        self._operator, self._opclass = _DISTANCES[distance]
        self._ident = sql.Identifier(*table.split("."))
        self._index = sql.Identifier(f"{table.replace('.', '_')}_embedding_hnsw")
        self._ready = False
        self._landing = _Landing()
        self._setup_lock = threading.Lock()
        self._connections = _Connections(dsn, connect_timeout, self._prepare)
        self.where = place(dsn, table)
        #: where a removed row may remain (``Store.residual``): no VACUUM FULL follows the
        #: DELETE (it would lock the team's table), so the old row version stays until reused
        self.residual = [
            *postgres_table(table),
            embedding_provider("the embed function's model (if remote)"),
        ]
        self.vector(f"{name} dimension probe")  # a wrong embedder fails at startup, not later

    # -- plumbing --------------------------------------------------------------------------------

    def vector(self, text: str) -> Vector:
        """The text's embedding, checked against ``dimensions``."""
        values = [float(v) for v in self._embed(text)]
        if len(values) != self.dimensions:
            raise StoreError(
                self.name,
                f"the embedder returned {len(values)} floats but dimensions = {self.dimensions}",
            )
        return Vector(values)

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        with self._setup_lock:
            if not self._ready:
                self._setup(conn)
                self._ready = True
        # Bound every later statement: a lock held elsewhere (a migration, an open transaction)
        # must fail the removal with a reason, not hang a forget that cannot be cancelled.
        timeout = f"{max(1, round(self.statement_timeout * 1000))}ms"
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))
        # A statement whose client is gone (this process ended, its socket closed) is cancelled
        # instead of committing once a lock frees up (PostgreSQL 14+; older servers lack it).
        conn.execute(
            "SELECT set_config(name, %s, false) FROM pg_settings "
            "WHERE name = 'client_connection_check_interval'",
            (CLIENT_CHECK_INTERVAL,),
        )
        register_vector(conn)  # only after the extension exists

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        if self.create:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, text text NOT NULL, "
                    "embedding vector({}) NOT NULL, metadata jsonb NOT NULL, "
                    "created_at timestamptz NOT NULL DEFAULT now())"
                ).format(self._ident, sql.Literal(self.dimensions))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding {})").format(
                    self._index, self._ident, sql.SQL(self._opclass)
                )
            )
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = 'embedding' AND NOT attisdropped",
            (self.table,),
        ).fetchone()
        if row is None:
            raise StoreError(
                self.name,
                f"table {self.table} does not exist (or has no embedding column); create it or "
                "set create = true",
            )
        if row[0] != f"vector({self.dimensions})":
            raise StoreError(
                self.name,
                f"table {self.table} has embedding {row[0]} but dimensions = {self.dimensions}",
            )

    # -- the Store protocol ----------------------------------------------------------------------

    def _put(self, fact: Fact) -> str:
        text = fact_text(fact)
        embedding = self.vector(text)
        statement = sql.SQL(
            "INSERT INTO {} (id, text, embedding, metadata) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, "
            "embedding = EXCLUDED.embedding, metadata = EXCLUDED.metadata"
        ).format(self._ident)
        params = (fact.fact_id, text, embedding, Jsonb(custody_metadata(fact)))

        def insert(conn: psycopg.Connection[Any]) -> None:
            sent = time.monotonic()
            try:
                conn.execute(statement, params)
            except psycopg.OperationalError as exc:
                if exc.sqlstate is None:  # no answer: the server may still run the INSERT
                    until = sent + self.statement_timeout + _LANDING_SLACK
                    self._landing.note(fact.fact_id, until)
                raise

        self._connections.run(insert)
        return fact.fact_id

    def _remove(self, external_id: str) -> None:
        statement = sql.SQL("DELETE FROM {} WHERE id = %s").format(self._ident)
        self._connections.run(lambda conn: conn.execute(statement, (external_id,)))

    def nearest(self, text: str) -> list[str]:
        """Ids of the ``top_k`` rows nearest to the text's embedding (what retrieval returns)."""
        query = self.vector(text)
        statement = sql.SQL("SELECT id FROM {} ORDER BY embedding {} %s LIMIT %s").format(
            self._ident, sql.SQL(self._operator)
        )
        rows = self._connections.run(
            lambda conn: conn.execute(statement, (query, self.top_k)).fetchall()
        )
        return [row[0] for row in rows]

    def _verify_removed(self, external_id: str, fact: Fact) -> bool:
        statement = sql.SQL("SELECT 1 FROM {} WHERE id = %s").format(self._ident)
        if self._connections.run(lambda conn: conn.execute(statement, (external_id,)).fetchone()):
            return False
        return external_id not in self.nearest(fact_text(fact))

    def _held_ids(self, fact: Fact) -> list[str]:
        self._landing.wait(fact.fact_id)
        statement = sql.SQL("SELECT id FROM {} WHERE id = %s OR metadata->>'factId' = %s").format(
            self._ident
        )
        params = (fact.fact_id, fact.fact_id)
        rows = self._connections.run(lambda conn: conn.execute(statement, params).fetchall())
        return [row[0] for row in rows]

    async def put(self, fact: Fact) -> str:
        return await call_sdk(self.name, "put", self._put, fact)

    async def held_ids(self, fact: Fact) -> list[str]:
        return await call_sdk(self.name, "look up by fact id", self._held_ids, fact)

    async def remove(self, external_id: str, fact: Fact) -> None:
        await call_sdk(self.name, "remove", self._remove, external_id)

    async def verify_removed(self, external_id: str, fact: Fact) -> bool:
        return await call_sdk(self.name, "verify", self._verify_removed, external_id, fact)

    def close(self) -> None:
        self._connections.close()


def place(dsn: str, table: str) -> str:
    """Where the rows go (``Store.where``): ``postgresql://host:port/db table:<table>``, read
    from the URL or key-value string without its user, password or options. No connection."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        params = {}
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    if host.startswith("/"):  # a socket folder, as libpq's URLs spell it
        host = quote(host, safe="")
    elif ":" in host and "," not in host:
        host = f"[{host}]"
    database = params.get("dbname") or params.get("user") or ""
    return f"postgresql://{host}:{params.get('port') or 5432}/{database} table:{table}"


def build(settings: PgvectorSettings, *, name: str) -> PgvectorStore:
    """The registered factory: the URL from the named variable, the embedder by reference."""
    dsn = secret_from_env(name, settings.dsn_env, what="PostgreSQL URL") or settings.dsn
    assert dsn is not None  # the settings model requires one of the two
    try:
        embed = resolve_ref(settings.embed)
    except (ImportError, AttributeError) as exc:
        raise StoreError(name, f"embed {settings.embed!r} cannot be imported: {exc}") from exc
    if not callable(embed):
        raise StoreError(name, f"embed {settings.embed!r} is not callable")
    return PgvectorStore(
        name,
        dsn,
        embed,
        dimensions=settings.dimensions,
        table=settings.table,
        top_k=settings.top_k,
        distance=settings.distance,
        create=settings.create,
        connect_timeout=settings.connect_timeout,
        statement_timeout=settings.statement_timeout,
    )
