"""Crypto-shred's data keys: each key's AES-GCM cipher is set up once, by the append that
uses it or by its block's thread, never both; and never for a key the pool destroys unused at
close (``keypool``, ``ShreddingBackend.append``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger
from agent_custody_state.backends.keystore_file import FileKeyStore
from agent_custody_state.ledger import envelope, keypool, shred
from agent_custody_state.ledger.keypool import KeyPool


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every cipher set up from now on, by its key."""
    built: list[bytes] = []
    make = envelope.cipher_for

    def counting(key: bytes) -> Any:
        built.append(key)
        return make(key)

    monkeypatch.setattr(envelope, "cipher_for", counting)
    monkeypatch.setattr(shred, "cipher_for", counting, raising=False)
    monkeypatch.setattr(keypool, "cipher_for", counting)
    return built


def _gated(tmp_path: Path) -> tuple[FileKeyStore, threading.Event]:
    """A key store whose writes wait for the gate: keys are taken before any is prepared."""
    keys = FileKeyStore(tmp_path / "k.keys")
    gate = threading.Event()
    put = keys.put

    def gated_put(made: Any) -> None:
        assert gate.wait(10)
        put(made)

    keys.put = gated_put  # type: ignore[method-assign]
    return keys, gate


def test_a_cipher_is_set_up_once_per_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, gate = _gated(tmp_path)
    led = Ledger(str(tmp_path / "l.jsonl"), forget_mode="crypto-shred", key_store=keys)
    try:
        backend = led.backend
        assert isinstance(backend, shred.ShreddingBackend)
        pool, inner = backend._pool, backend.inner
        refills: list[Any] = []
        at_seal: list[int] = []
        append = inner.append

        def sealed_then_open(events: Any) -> None:
            # Every value is sealed now, before any block was written: the append set up
            # each cipher itself. The blocks may be written now.
            refills.extend(pool._refills)
            at_seal.append(len(built))
            append(events)
            gate.set()

        inner.append = sealed_then_open  # type: ignore[method-assign]
        built = _counted(monkeypatch)
        items = [
            {"subject": f"s{i}", "predicate": "p", "value": i, "space": "org", "actor": "t"}
            for i in range(10)
        ]
        done = led.assert_many(items)
        assert at_seal == [len(items)]
        for refill in refills:
            refill._thread.join(10)
        made = len(items) + len(pool._free)  # handed out, and made ahead
        assert len(built) == made, f"{len(built) - made} ciphers set up twice"
        assert len(set(built)) == len(built)
        read = led.get(done[3].fact_id)
        assert read is not None and read.value == 3
    finally:
        gate.set()
        led.close()
        keys.close()


def test_no_cipher_is_set_up_for_keys_released_unused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _counted(monkeypatch)
    keys, gate = _gated(tmp_path)
    pool = KeyPool(keys)
    waiting = threading.Event()
    wait = keypool._Refill.wait

    def signalled(refill: Any) -> None:
        waiting.set()
        wait(refill)

    monkeypatch.setattr(keypool._Refill, "wait", signalled)
    try:
        pool.take(1)
        closing = threading.Thread(target=pool.release)
        closing.start()
        assert waiting.wait(10)  # release waits for the blocks being written
        gate.set()
        closing.join(10)
        assert not closing.is_alive()
        assert built == [], f"{len(built)} ciphers set up for keys destroyed unused"
    finally:
        gate.set()
        keys.close()
