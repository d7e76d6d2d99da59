"""LangGraph's PostgresStore on a pool whose every statement is bounded.

The store's calls run in worker threads nobody can cancel (``call_sdk``), so a statement that
waits for a lock another session holds would hang its put, lookup or removal for as long as the
lock is held, and with it LangGraph's store, which serialises every ``batch`` behind one lock.
Each pooled connection therefore sets, when the pool opens it (its ``configure`` hook, which
leaves the URL's own ``options`` alone):

* ``statement_timeout`` (the ``statement_timeout`` setting, 30 s by default): a statement that
  runs or waits longer is cancelled and the call fails with the server's reason;
* ``client_connection_check_interval`` (PostgreSQL 14+; older servers lack it and skip it): a
  statement whose client closed its socket (the process ended) is cancelled within a second
  instead of committing once the lock it waits for is free, by the time a restarted store looks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_custody_state.plugin import secret_from_env

from .settings import LangGraphSettings

__all__ = ["CLIENT_CHECK_INTERVAL", "bound_session", "open_postgres"]

#: How often a running statement checks that its client is still connected (PostgreSQL 14+).
CLIENT_CHECK_INTERVAL = "1s"


def bound_session(statement_timeout: float) -> Callable[[Any], None]:
    """The pool's ``configure`` hook: bound every statement of a new connection."""
    timeout = f"{max(1, round(statement_timeout * 1000))}ms"

    def configure(conn: Any) -> None:
        # autocommit (as PostgresStore's connections are): the settings last for the session.
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))
        conn.execute(
            "SELECT set_config(name, %s, false) FROM pg_settings "
            "WHERE name = 'client_connection_check_interval'",
            (CLIENT_CHECK_INTERVAL,),
        )

    return configure


def open_postgres(
    settings: LangGraphSettings, name: str, index: dict[str, Any] | None
) -> tuple[Any, Callable[[], None]]:
    """LangGraph's PostgresStore, set up, on a bounded pool; with a function that closes it."""
    from langgraph.store.postgres import PostgresStore
    from psycopg import Connection
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    dsn = secret_from_env(name, settings.dsn_env, what="PostgreSQL URL")
    assert dsn is not None
    # The connection options PostgresStore.from_conn_string uses.
    options = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    # One direct connection first: a wrong URL or password fails here with the driver's
    # own message (a pool would only report a timeout).
    Connection.connect(dsn, **options).close()  # type: ignore[arg-type]
    # A pool that checks connections on checkout, so a server restart costs one failed
    # call at most instead of a store that fails until the process restarts.
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=4,
        kwargs=options,
        configure=bound_session(settings.statement_timeout),
        check=ConnectionPool.check_connection,
        open=False,
    )
    pool.open(wait=True, timeout=30)
    pg_store = PostgresStore(pool, index=index)  # type: ignore[arg-type]
    try:
        pg_store.setup()
    except BaseException:
        pool.close()
        raise
    return pg_store, pool.close
