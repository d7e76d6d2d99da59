"""Crypto-shred mode in the core: envelopes on disk, plaintext to reads, keys pooled and destroyed.

The backend-independent rules (reads equal to plain mode, forget, earlier copies, recovery) are
conformance rules (``EB-S-*``) run on every backend; these tests cover what is the core's own:
the JSONL line format, the file key store, the key pool, tampering, configuration and commands.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.keystore_file import FileKeyStore
from agent_custody_state.backends.keystore_memory import MemoryKeyStore
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.cli import main
from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.keypool import FIRST_BLOCK, MAX_BLOCK
from agent_custody_state.ledger.keystore import KeyStoreError
from agent_custody_state.ledger.model import event_from_json
from agent_custody_state.ledger.shred import ShreddingBackend

SECRET = "s3cret-\u65e5\u672c-\U0001f600"
VALUES = [
    SECRET,
    {"b": [1, 2.5, None, True, "\u2028"], "a": {"10": 1, "9": 2}},
    "lone \ud800 surrogate",
    1e21,
    -0.0,
    9007199254740991,
    None,
    "",
    [],
]


def _fact(ledger: Ledger, value: object, **kw: object) -> str:
    args = {"subject": "acct:1", "predicate": "p", "space": "org", "actor": "a", **kw}
    return ledger.assert_fact(value=value, **args).fact_id  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_every_value_reads_back_as_in_plain_mode(tmp_path: Path, kind: str) -> None:
    # The reference is a plain JSONL ledger, reopened: its values come back from the wire form.
    with Ledger(tmp_path / "plain.jsonl") as plain:
        ids = [_fact(plain, value) for value in VALUES]
    where = MemoryBackend() if kind == "memory" else tmp_path / "shred.jsonl"
    with (
        Ledger(tmp_path / "plain.jsonl") as plain,
        Ledger(where, forget_mode="crypto-shred") as shred,
    ):
        for fid, value in zip(ids, VALUES, strict=True):
            got = shred.get(_fact(shred, value))
            assert got is not None and repr(got.value) == repr(plain.get(fid).value)  # type: ignore[union-attr]
        assert repr([f.value for f in shred.facts()]) == repr([f.value for f in plain.facts()])


def test_jsonl_line_carries_an_envelope_the_original_reads_as_a_value(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fid = _fact(ledger, SECRET)
    data = path.read_bytes()
    for form in (SECRET, json.dumps(SECRET)[1:-1], json.dumps(SECRET, ensure_ascii=False)):
        assert form.encode("utf-8") not in data
    line = json.loads(data)
    assert list(line["fact"]) == list(json.loads(data)["fact"])  # wire key order unchanged
    value = line["fact"]["value"]
    assert list(value) == ["shred", "kid", "iv", "ct"] and value["shred"] == "A256GCM"
    assert event_from_json(data.decode().strip()).fact_id == fid
    assert (tmp_path / "l.jsonl.keys").exists()


def test_plain_mode_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        _fact(ledger, SECRET)
    assert json.dumps(SECRET, ensure_ascii=False).encode() in path.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.jsonl", "l.jsonl.lock"]


def test_a_tampered_ciphertext_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        fid = _fact(ledger, SECRET)
    line = json.loads(path.read_text())
    ct = line["fact"]["value"]["ct"]
    line["fact"]["value"]["ct"] = ("A" if ct[0] != "A" else "B") + ct[1:]
    path.write_text(json.dumps(line, separators=(",", ":")) + "\n")
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        with pytest.raises(LedgerError, match="does not authenticate") as info:
            ledger.get(fid)
    assert info.value.code == "bad_ciphertext"


class CountingKeys(MemoryKeyStore):
    """A memory key store that records the size of each write, and can hold writes back."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []
        self.ids: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()

    def put(self, keys: Mapping[str, bytes]) -> None:
        self.writes.append(len(keys))
        self.ids.append(list(keys))
        assert self.gate.wait(10), "a write was held back for good"
        super().put(keys)

    def size(self) -> int:
        return len(self.get(list(self._keys)))


def _writes(keys: CountingKeys, n: int) -> list[int]:
    """The key store's writes once there are ``n`` (a block ahead is made and written by a
    thread of its own, which may still be at it when the append that started it returns)."""
    deadline = time.monotonic() + 10
    while len(keys.writes) < n and time.monotonic() < deadline:
        time.sleep(0.001)
    return keys.writes


def test_keys_are_created_ahead_in_blocks_and_unused_ones_destroyed_at_close() -> None:
    assert (FIRST_BLOCK, MAX_BLOCK) == (64, 1024)
    keys = CountingKeys()
    ledger = Ledger(MemoryBackend(), forget_mode="crypto-shred", key_store=keys)
    ids = [_fact(ledger, i) for i in range(300)]
    # Blocks doubling from 64, each next one started ahead: 300 appends, four key writes.
    assert _writes(keys, 4) == [64, 128, 256, 512]
    ledger.assert_many(
        [
            {"subject": "b", "predicate": "p", "value": i, "space": "o", "actor": "a"}
            for i in range(2000)
        ]
    )
    # The batch takes the 660 keys left and one write of what it lacks; then the next ahead.
    assert _writes(keys, 6)[4:] == [2000 - 660, 2000]
    _fact(ledger, "one more")
    assert len(keys.writes) == 6  # "one more" takes a key of the block written ahead
    assert keys.size() == sum(keys.writes) == 4300
    ledger.forget(fact_id=ids[0], actor="a", reason="r")
    ledger.close()
    assert keys.size() == 2300  # only the keys of live facts remain


def test_key_ids_grow_with_time_and_each_block_is_written_in_id_order() -> None:
    """A key id is the block's creation time (ms, 48 bits) and 80 random bits: the key store's
    index grows at its end instead of taking each key at a random page."""
    keys = CountingKeys()
    before = time.time_ns() // 1_000_000
    ledger = Ledger(MemoryBackend(), forget_mode="crypto-shred", key_store=keys)
    for i in range(200):
        _fact(ledger, i)
    after = time.time_ns() // 1_000_000
    ledger.close()
    assert len(keys.ids) >= 3
    stamps = []
    for block in keys.ids:
        assert block == sorted(block)
        assert all(len(k) == 32 and int(k, 16) >= 0 and k == k.lower() for k in block)
        assert len({k[:12] for k in block}) == 1  # one creation time per block
        stamps.append(int(block[0][:12], 16))
        assert len({k[12:] for k in block}) == len(block)
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after


def test_an_append_does_not_wait_for_the_block_written_ahead() -> None:
    keys = CountingKeys()
    ledger = Ledger(MemoryBackend(), forget_mode="crypto-shred", key_store=keys)
    _fact(ledger, 0)  # the first block (waited for) and the next one, ahead
    assert _writes(keys, 2) == [64, 128]
    keys.gate.clear()  # writes from now on hang until the gate opens
    for i in range(1, 64):
        _fact(ledger, i)  # keys of the first block: no wait for anything ahead
    assert keys.writes[:2] == [64, 128]
    keys.gate.set()
    ledger.close()
    assert keys.size() == 64


def test_forget_leaves_no_copy_of_the_key_in_the_key_store_files(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred") as ledger:
        fids = [_fact(ledger, f"v{i}", subject=f"s{i}") for i in range(40)]
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        kids = [kid_of(backend.inner.get_assert(f).fact.value) for f in fids]  # type: ignore[union-attr]
        keys = backend.keys.get([k for k in kids if k])
        for fid in fids[:20]:
            ledger.forget(fact_id=fid, actor="a", reason="r")
    files = [p for p in tmp_path.iterdir() if p.name.startswith("l.jsonl.keys")]
    assert [p.name for p in files] == ["l.jsonl.keys"]  # the rollback journal is gone
    data = files[0].read_bytes()
    assert not [k for k in kids[:20] if k and keys[k] in data]
    assert all(keys[k] in data for k in kids[20:] if k)  # the scan can see a key


def test_file_key_store_is_private_and_refuses_other_files(tmp_path: Path) -> None:
    FileKeyStore(tmp_path / "k.keys").close()
    assert stat.S_IMODE(os.stat(tmp_path / "k.keys").st_mode) == 0o600
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(KeyStoreError, match="not a key store"):
        FileKeyStore(other)
    with pytest.raises(KeyStoreError, match="does not exist"):
        FileKeyStore(tmp_path / "missing" / "k.keys")
    assert not (tmp_path / "missing").exists()


def test_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="forget_mode must be"):
        Ledger(tmp_path / "l.jsonl", forget_mode="shred")
    with pytest.raises(LedgerError, match="key_store needs"):
        Ledger(tmp_path / "l.jsonl", key_store=str(tmp_path / "k.keys"))
    assert list(tmp_path.iterdir()) == []
    key_path = tmp_path / "elsewhere.keys"
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred", key_store=str(key_path)) as one:
        fid = _fact(one, SECRET)
    assert key_path.exists() and not (tmp_path / "l.jsonl.keys").exists()
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred") as wrong_keys:
        assert wrong_keys.get(fid).value is None  # type: ignore[union-attr]


def test_config_and_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "memory.toml"
    conf.write_text('ledger = "l.jsonl"\nforget_mode = "crypto-shred"\nkey_store = "k.keys"\n')
    config = load_config(conf)
    assert config.forget_mode == "crypto-shred" and config.key_store == str(tmp_path / "k.keys")
    conf.write_text('ledger = "l.jsonl"\nkey_store = "k.keys"\n')
    with pytest.raises(ConfigError, match="key_store is used only with"):
        load_config(conf)
    ledger = tmp_path / "l.jsonl"
    keys = tmp_path / "k.keys"
    with Ledger(ledger, forget_mode="crypto-shred", key_store=str(keys)) as book:
        _fact(book, SECRET)
    out = tmp_path / "export.jsonl"
    shred = ["--forget-mode", "crypto-shred", "--key-store", str(keys)]
    assert main(["export", "--ledger", str(ledger), "--out", str(out), *shred]) == 0
    assert json.dumps(SECRET, ensure_ascii=False) in out.read_text()  # an export is plaintext
    sweep = ["sweep", "--ledger", str(ledger), "--before", "2100-01-01T00:00:00Z", "--reason", "r"]
    assert main([*sweep, "--forget-mode", "plain"]) == 1  # asked for plain mode: refused
    assert "written in crypto-shred mode" in capsys.readouterr().err
    assert main([*sweep, *shred]) == 0
    capsys.readouterr()
    with Ledger(ledger, forget_mode="crypto-shred", key_store=str(keys)) as book:
        assert book.facts()[0].forgotten is not None
        assert book.backend.keystore().doomed() == {}


def test_verify_checks_sealed_values_with_the_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        kept = ledger.assert_fact(subject="s", predicate="p", value=SECRET, space="o", actor="a")
        gone = ledger.assert_fact(subject="t", predicate="p", value="bye", space="o", actor="a")
        ledger.forget(fact_id=gone.fact_id, actor="a", reason="gdpr")
    plain = ["--forget-mode", "plain"]  # without the key store: leaves and links, values noted
    assert main(["verify", "--ledger", str(path), *plain]) == 0
    assert "1 value(s) sealed by crypto-shred mode" in capsys.readouterr().err
    assert main(["verify", "--ledger", str(path), "--key-store", "default"]) == 0
    assert "sealed" not in capsys.readouterr().err
    # An envelope edited in place keeps its leaf (the value is not part of it): only opening
    # it with its key shows the edit.
    lines = path.read_text("utf-8").splitlines()
    event = json.loads(lines[0])
    assert event["fact"]["factId"] == kept.fact_id
    ct = event["fact"]["value"]["ct"]
    event["fact"]["value"]["ct"] = ("A" if ct[0] != "A" else "B") + ct[1:]
    lines[0] = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n", "utf-8")
    assert main(["verify", "--ledger", str(path), "--key-store", "default"]) == 1
    assert "first bad event 1: the sealed value does not open with its key" in (
        capsys.readouterr().out
    )


def test_appends_read_only_the_last_event_not_the_whole_ledger(tmp_path: Path) -> None:
    # The chain links each append to the last event; in crypto-shred mode that must be the
    # inner backend's indexed read, not a walk opening every envelope (once +400% per append).
    with Ledger(tmp_path / "l.jsonl", forget_mode="crypto-shred") as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)

        def walked() -> None:
            raise AssertionError("an append walked every event")

        backend.inner.iter_events = walked  # type: ignore[method-assign]
        ledger.assert_fact(subject="s", predicate="q", value=2, space="o", actor="a")
        assert backend.last_event().fact.value == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("locks_keys", [False, True])
def test_appends_fetch_no_key_and_write_the_reference_line(
    tmp_path: Path, locks_keys: bool
) -> None:
    # The chain's head is the inner backend's (the leaf leaves the value out): an append opens
    # no envelope, so a new fact reads nothing from the key store. On a backend locking keys
    # (PostgreSQL) a write raises its stamp to the last event's time: read without opening it
    # either (``last_tx_time``). And the line the shredding backend encodes itself (orjson,
    # unchecked) is the reference encoder's, byte for byte.
    from agent_custody_state.canonical import js_json

    path = tmp_path / "l.jsonl"
    with Ledger(path, forget_mode="crypto-shred") as ledger:
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        backend.locks_keys = locks_keys
        first = _fact(ledger, "first")

        def fetched(kids: object) -> dict[str, bytes]:
            raise AssertionError("an append fetched a key")

        real_get = backend.keys.get
        backend.keys.get = fetched  # type: ignore[method-assign]
        for value in VALUES:
            _fact(ledger, value, subject="acct:2")
        ledger.assert_many([{"subject": f"b{i}", "predicate": "p", "value": v, "space": "o",
                             "actor": "a"} for i, v in enumerate(VALUES)])  # fmt: skip
        backend.keys.get = real_get  # type: ignore[method-assign]
        _fact(ledger, "second", supersedes=first)  # reads the superseded fact: its key too
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 + 2 * len(VALUES)
    for line in lines:
        assert line == js_json(event_from_json(line).to_dict())


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_an_as_of_opens_only_the_values_it_returns(tmp_path: Path, kind: str) -> None:
    # An as-of decides which facts it returns without their values (most of a subject's
    # asserts are superseded): only the returned ones are opened, their keys in one fetch. A
    # returned fact whose key is gone reads as null, as in every other read.
    where = MemoryBackend() if kind == "memory" else tmp_path / "l.jsonl"
    with Ledger(where, forget_mode="crypto-shred") as ledger:
        old = _fact(ledger, "old plan")
        new = _fact(ledger, {"plan": "new"}, supersedes=old)
        other = _fact(ledger, [1, 2.5], predicate="q")
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        asked: list[set[str]] = []
        real_get = backend.keys.get

        def get(kids: object) -> dict[str, bytes]:
            asked.append(set(kids))  # type: ignore[call-overload]
            return real_get(kids)  # type: ignore[arg-type]

        backend.keys.get = get  # type: ignore[method-assign]
        facts = {f.fact_id: f.value for f in ledger.as_of(subject="acct:1")}
        assert facts == {new: {"plan": "new"}, other: [1, 2.5]}
        kid = {fid: kid_of(backend.inner.get_assert(fid).fact.value) for fid in (old, new, other)}  # type: ignore[union-attr]
        assert asked == [{kid[new], kid[other]}]  # not the superseded fact's key
        backend.keys.destroy([kid[other]])
        assert {f.fact_id: f.value for f in ledger.as_of(subject="acct:1")}[other] is None
        past = ledger.as_of(subject="acct:1", valid_at="2000-01-01T00:00:00Z")
        assert past == []


def test_with_value_keeps_every_other_field() -> None:
    from dataclasses import replace

    from agent_custody_state.ledger.envelope import with_value
    from agent_custody_state.ledger.model import AssertEvent, Fact, Forgotten, Source

    fact = Fact(
        *("f", "s", "p", 1, "o", "a", Source("r"), "attested", {"mem0": "m-1"}),
        *("2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z", 0.5),
        *(Forgotten("d", "sha256", "2026-03-01T00:00:00.000Z"), {"valueSalt": "x"}),
    )
    event = AssertEvent("e", "2026-01-01T00:00:00.000Z", fact, "f0", {"chain": {"seq": 1}})
    opened = with_value(event, {"v": 2})
    assert opened == replace(event, fact=replace(fact, value={"v": 2}))
    assert opened.line is None
