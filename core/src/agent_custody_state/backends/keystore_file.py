"""The file key store: a SQLite database of its own, never inside the ledger's files.

The default for file ledgers is ``<ledger>.keys`` beside the ledger file itself, every symlink
resolved (``ledger.jsonl.keys``, ``ledger.sqlite.keys``; ``SidecarKeys``); ``key_store=`` /
``--key-store`` puts it anywhere else, and it belongs on another volume than the events when
backups copy whole folders. Not a table in the SQLite ledger's own file: every backup of that
file would then carry the keys with the ciphertext.

Settings chosen for erasure and durability:

* ``journal_mode=DELETE`` (a rollback journal, not WAL): a transaction's old page images go to a
  journal that is unlinked at commit, so once ``destroy`` returns no file of the store holds the
  key (a WAL would keep the page with the key until a checkpoint);
* ``secure_delete=ON``: a deleted key's bytes are overwritten with zeros in the page;
* ``synchronous=FULL``: every write is on disk when the call returns;
* the file is created with mode 0600 (the keys are secrets), and its ``application_id`` marks it,
  so a path that names some other SQLite database is refused instead of written into.

A process forked after the open never uses the parent's connection (SQLite forbids carrying one
across ``fork()``: its lock bookkeeping is the parent's): the first use in the child opens its
own, and the inherited one is kept referenced, never closed there (its close could act on files
the parent is using). At the fork the child gets a new lock (``ledger.forks``): one a
thread of the parent held would never be released in the child.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from agent_custody_state.ledger import forks
from agent_custody_state.ledger.files import names_of, real_file
from agent_custody_state.ledger.keystore import (
    KeyStore,
    KeyStoreError,
    append_erasures,
    read_erasures,
)
from agent_custody_state.ledger.modemark import CRYPTO_SHRED, ModeMark

if TYPE_CHECKING:
    import sqlite3

T = TypeVar("T")

#: ``PRAGMA application_id`` of a key store file ("ACSK").
APPLICATION_ID = 0x4143534B
DEFAULT_BUSY_TIMEOUT = 30.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS keys (kid TEXT PRIMARY KEY, key BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS doomed (kid TEXT PRIMARY KEY, fact_id TEXT NOT NULL) WITHOUT ROWID",
)
_IDS = "(SELECT value FROM json_each(?))"

#: Connections inherited across fork(), set aside in this process: referenced, never closed.
_INHERITED: list[Any] = []


def _sqlite() -> ModuleType:
    # Imported on first use: a plugin importing agent_custody_state.plugin stays cheap to load.
    import sqlite3

    return sqlite3


class FileKeyStore(KeyStore):
    """Data keys in a SQLite file of their own; several processes may share it."""

    kind = "file"

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        erasures: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(location)
        self.location = str(location)
        # The erasure log beside the ledger (``keystore.append_erasures``): ``SidecarKeys``'s.
        self.erasures = None if erasures is None else Path(erasures)
        if not self.path.parent.is_dir():
            raise KeyStoreError(
                f"key store {self.location}: the folder {self.path.parent} does not exist "
                "(key stores are never created in missing folders)"
            )
        if self.path.is_dir():
            raise KeyStoreError(f"key store {self.location} is a folder; name a file inside it")
        try:  # created private before SQLite opens it
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:  # no descriptor left (EMFILE), a full folder: named, no traceback
            raise KeyStoreError(f"key store {self.location}: {exc.strerror or exc}") from None
        self._lock = threading.Lock()
        self._closed = False
        self._timeout = busy_timeout
        self._error: type[Exception] = _sqlite().Error
        self._conn: sqlite3.Connection = self._connect()
        self._pid = os.getpid()  # the process the connection was opened in
        try:
            self._run(self._setup)
        except BaseException:
            self.close()
            raise
        forks.watch(self)

    def _connect(self) -> sqlite3.Connection:
        driver = _sqlite()
        try:
            conn: sqlite3.Connection = driver.connect(
                str(self.path), timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            return conn
        except driver.Error as exc:
            raise KeyStoreError(f"key store {self.location}: {exc}") from None

    def _leave_inherited(self) -> None:
        """Set the parent's connection aside in a forked child (see the module docstring)."""
        if self._conn is not None:
            _INHERITED.append(self._conn)
            self._conn = None  # type: ignore[assignment]  # the next ``_run`` connects

    def _after_fork(self) -> None:
        if not self._closed:
            self._lock = threading.Lock()
            self._leave_inherited()

    def local_files(self) -> list[str]:
        """The key file and its rollback journal, by the file's own name (SQLite keeps the
        journal beside the file a symlink names)."""
        real = real_file(self.path)
        return [str(real), f"{real}-journal"]

    def _setup(self) -> None:
        conn = self._conn
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
        if str(mode).lower() != "delete":
            raise KeyStoreError(f"key store {self.location}: journal mode {mode!r} refused")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
            if app != APPLICATION_ID and tables:
                raise KeyStoreError(
                    f"key store {self.location} is a SQLite database but not a key store; "
                    "name another file"
                )
            if app != APPLICATION_ID:
                # A new key store, in a file that may have been made beforehand with a wider
                # mode than the 0600 it is created with here: keys are for this user only
                # (a file another user owns keeps the mode its owner chose).
                with suppress(PermissionError):
                    os.chmod(self.path, 0o600)
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            for ddl in _SCHEMA:
                conn.execute(ddl)
            conn.execute("COMMIT")
        except BaseException:
            with suppress(self._error):
                conn.execute("ROLLBACK")
            raise

    # -- running statements ------------------------------------------------------------------

    def _run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise KeyStoreError(f"key store {self.location} is closed")
            if self._pid != os.getpid():  # forked: a connection of this process's own
                self._leave_inherited()
                self._conn = self._connect()
                try:
                    self._setup()  # the per-connection settings (and nothing to create)
                except self._error as exc:
                    raise KeyStoreError(f"key store {self.location}: {exc}") from None
                self._pid = os.getpid()
            try:
                return fn()
            except self._error as exc:
                raise KeyStoreError(f"key store {self.location}: {exc}") from None

    def _write(self, *steps: tuple[str, Any]) -> None:
        """One durable transaction of ``(sql, params)`` steps (params: a tuple, or a list of
        tuples for ``executemany``)."""

        def run() -> None:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in steps:
                    if isinstance(params, list):
                        conn.executemany(sql, params)
                    else:
                        conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                with suppress(self._error):
                    conn.execute("ROLLBACK")
                raise

        self._run(run)

    # -- the KeyStore interface ---------------------------------------------------------------

    def put(self, keys: Mapping[str, bytes]) -> None:
        if keys:
            self._write(("INSERT INTO keys (kid, key) VALUES (?, ?)", list(keys.items())))

    def get(self, kids: Collection[str]) -> dict[str, bytes]:
        if not kids:
            return {}
        ids = json.dumps(list(kids))
        rows = self._run(
            lambda: self._conn.execute(
                f"SELECT kid, key FROM keys WHERE kid IN {_IDS}", (ids,)
            ).fetchall()
        )
        return {kid: bytes(key) for kid, key in rows}

    def destroy(self, kids: Collection[str]) -> None:
        if kids:
            ids = (json.dumps(list(kids)),)
            self._write(
                (f"DELETE FROM keys WHERE kid IN {_IDS}", ids),
                (f"DELETE FROM doomed WHERE kid IN {_IDS}", ids),
            )

    def doom(self, intents: Mapping[str, str]) -> None:
        if intents:
            if self.erasures is not None:
                append_erasures(self.erasures, intents, self.location)
            self._write(
                (
                    "INSERT OR REPLACE INTO doomed (kid, fact_id) VALUES (?, ?)",
                    list(intents.items()),
                )
            )

    def spare(self, kids: Collection[str]) -> None:
        if kids:
            self._write((f"DELETE FROM doomed WHERE kid IN {_IDS}", (json.dumps(list(kids)),)))

    def doomed(self) -> dict[str, str]:
        rows = self._run(lambda: self._conn.execute("SELECT kid, fact_id FROM doomed").fetchall())
        return dict(rows)

    def buried(self) -> dict[str, list[str]]:
        return {} if self.erasures is None else read_erasures(self.erasures)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pid != os.getpid():  # the parent's: set aside, not closed
                self._leave_inherited()
            elif self._conn is not None:
                with suppress(self._error):
                    self._conn.close()


class SidecarKeys:
    """For an event backend whose events are one file (``path``): crypto-shred keys in the
    file key store ``<ledger>.keys`` beside it by default, never inside the ledger's file,
    which every backup copies whole. That sidecar's existence also marks the file as written in
    crypto-shred mode (``recorded_forget_mode``) when nothing else records it: ledgers written
    before the mark existed (``ledger.modemark``).

    The default is named after the file itself, every symlink resolved (``files.FileNames``):
    one ledger opened as ``a.jsonl``, through a link ``b.jsonl -> a.jsonl`` or by a relative
    path has one key store. One an older version created beside a link (``b.jsonl.keys``) is
    used when none is beside the file (a writer links the file's own name to it), and two are
    refused naming both: which one holds a fact's key cannot be told."""

    path: Path

    def keystore(self, location: str | None = None) -> FileKeyStore:
        """The key store (``location``, else the default beside the file), with the erasure log
        ``<ledger>.shredded`` beside the ledger wherever the keys are: it travels with the
        ledger's backups, so a key store restored alone is found (``keystore.buried``)."""
        where = location if location is not None else self._default_keys()
        return FileKeyStore(where, erasures=names_of(self).sidecar("shredded"))

    def _default_keys(self) -> str:
        names = names_of(self)
        where = names.find("keys", "key store", getattr(self, "location", str(self.path)))
        own = names.sidecar("keys")
        if where != own and not getattr(self, "read_only", False):
            # Named after a symlink by an older version: the file's own name becomes a link to
            # it, so every spelling reaches it, also once the symlink to the ledger is gone.
            target = where.name if where.parent == own.parent else str(real_file(where))
            with suppress(OSError):  # another opener made it first, or a read-only folder
                os.symlink(target, own)
            if real_file(own) == real_file(where):
                return str(own)
        return str(where)

    def recorded_forget_mode(self) -> ModeMark | None:
        recorded: ModeMark | None = super().recorded_forget_mode()  # type: ignore[misc]
        names = names_of(self)
        found = [f"{names.real}.keys", *map(str, names.legacy("keys"))]
        if recorded is None:
            there = next((p for p in found if os.path.exists(p)), None)
            return None if there is None else ModeMark(CRYPTO_SHRED, there, inferred=True)
        store = recorded.key_store
        if store is None or "://" in store:
            return recorded
        # The default key store recorded as its writer spelled the ledger (``ledger.jsonl.keys``
        # from its working folder), or by its absolute path in a folder the ledger has left
        # (moved, restored from a backup, mounted elsewhere), or has been copied from (the
        # recorded one, still there, is the original's). If it has this ledger's default name
        # and a key store of that name is beside this ledger, it is this one: a writer uses it
        # anyway (the default beside the file), and a forget through the recorded path would
        # destroy the original's key and leave this copy's.
        own = {os.path.basename(p) for p in found} | {f"{a.name}.keys" for a in names.aliases}
        there = next((p for p in found if os.path.exists(p)), None)
        if there is None or os.path.basename(store) not in own or _same_file(there, store):
            return recorded
        return ModeMark(recorded.mode, there, inferred=recorded.inferred)


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (False when either names nothing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
