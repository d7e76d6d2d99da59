"""Event-backend rules for crypto-shred mode: encrypted at rest, plaintext to every read.

A backend supports crypto-shred mode when ``EventBackend.keystore()`` returns a key store (its
default place for the keys, apart from the events). The rules run the ledger over the backend in
that mode and check that reads and as-of queries answer exactly as a plain ledger does, that the
backend only ever holds envelopes, that forget destroys the key (digest unchanged), that an
earlier copy of the events, restored after the forget, opens to nothing, and that a key store
restored alone is found by its erasure log (``KeyStore.buried``; skipped where none is kept). A plugin whose default
key store needs preparing (the PostgreSQL one needs its key database) overrides
``key_store_factory``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.canonical import value_digest
from agent_custody_state.ledger.backend import EventBackend
from agent_custody_state.ledger.envelope import kid_of
from agent_custody_state.ledger.keystore import KeyStore, KeyStoreError
from agent_custody_state.ledger.model import Event, ForgetEvent, Forgotten
from agent_custody_state.ledger.shred import ShreddingBackend

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, KeyStoreFactory, StoreFactory

__all__ = ["KeyStoreFactory", "ShredRules"]

#: Values of every JSON shape; each string carries the marker the at-rest scans look for.
MARK = "zq7-shred-marker"
VALUES: list[Any] = [
    f"pro-{MARK}",
    {"plan": {"tier": f"t-{MARK}", "seats": [1, 2.5, None, True]}, "b": 1, "a": 2},
    f"ünïcødé-日本-{MARK}-😀",
    123456789012345,
    [f"l-{MARK}", 0.1, {"k": []}, False],
    None,
    "",
    {"10": 1, "9": 2, "x": f"x-{MARK}"},
]


def _wire(event: Event) -> dict[str, Any]:
    """An event's wire dict without its random id (two ledgers draw different ids)."""
    out = event.to_dict()
    out.pop("eventId")
    return out


def _inner(ledger: Ledger) -> EventBackend:
    backend = ledger.backend
    assert isinstance(backend, ShreddingBackend), "the ledger is not in crypto-shred mode"
    return backend.inner


def _kid(ledger: Ledger, fact_id: str) -> str:
    event = _inner(ledger).get_assert(fact_id)
    assert event is not None
    kid = kid_of(event.fact.value)
    assert kid is not None, f"the backend holds fact {fact_id}'s value unencrypted"
    return kid


class _DestroyFails(KeyStore):
    """A key store whose ``destroy`` fails ``times`` times (a crash between commit and destroy)."""

    def __init__(self, inner: KeyStore, times: int = 1) -> None:
        self.inner, self.times = inner, times
        self.kind, self.location = inner.kind, inner.location

    def put(self, keys: Mapping[str, bytes]) -> None:
        self.inner.put(keys)

    def get(self, kids: Collection[str]) -> dict[str, bytes]:
        return self.inner.get(kids)

    def destroy(self, kids: Collection[str]) -> None:
        if self.times:
            self.times -= 1
            raise KeyStoreError("injected: the process died before destroying the key")
        self.inner.destroy(kids)

    def doom(self, intents: Mapping[str, str]) -> None:
        self.inner.doom(intents)

    def spare(self, kids: Collection[str]) -> None:
        self.inner.spare(kids)

    def doomed(self) -> dict[str, str]:
        return self.inner.doomed()


class ShredRules(BackendRules):
    """Crypto-shred mode over the backend (docs/forget.md)."""

    __suite_root__ = True

    @rule("EB-S-same-reads")
    def test_shred_reads_match_plain(
        self, store_factory: StoreFactory, key_store_factory: KeyStoreFactory
    ) -> None:
        """Every read in crypto-shred mode (as_of at every past transaction time, get, history,
        facts, learned_before, export) answers exactly as a plain ledger given the same calls.

        Troubleshooting: the backend must return what was appended (the envelope) unchanged,
        and ``keystore()`` must return the same keys on every call of one ledger.
        """
        # Without the hash chain: its salts are random per ledger, and the chain is the subject
        # of its own rules (CH-*); here only what the reads answer is compared.
        plain = Ledger(MemoryBackend(), clock=StepClock(), chain=False)
        shred = self._open(
            store_factory("shred-same"), key_store_factory, clock=StepClock(), chain=False
        )
        with plain, shred:
            checkpoints = [_script(book) for book in (plain, shred)]
            assert checkpoints[0] == checkpoints[1]
            marks = checkpoints[0]
            for tx_at in marks:
                for valid_at in ("2026-02-01T00:00:00Z", "2026-05-01T00:00:00Z", None):
                    assert shred.as_of(tx_at=tx_at, valid_at=valid_at) == plain.as_of(
                        tx_at=tx_at, valid_at=valid_at
                    ), f"as_of(tx_at={tx_at}, valid_at={valid_at}) differs"
            ids = [f.fact_id for f in plain.facts()]
            assert [shred.get(i) for i in ids] == [plain.get(i) for i in ids]
            for i in ids:
                assert [_wire(e) for e in shred.history(i)] == [_wire(e) for e in plain.history(i)]
            assert shred.facts() == plain.facts()
            assert shred.learned_before(shred.now()) == plain.learned_before(plain.now())
            assert [_wire(e) for e in shred.export()] == [_wire(e) for e in plain.export()]

    @rule("EB-S-at-rest")
    def test_shred_backend_holds_only_envelopes(self, shredded: Ledger) -> None:
        """The backend receives every value as an envelope (``{"shred","kid","iv","ct"}``) and
        never the plaintext; the ledger's own reads return the plaintext.

        Troubleshooting: store the value exactly as given; a backend must not re-encode or
        unwrap JSON objects inside a fact.
        """
        facts = [self._assert(shredded, subject=f"s{i}", value=v) for i, v in enumerate(VALUES)]
        batch = shredded.assert_many(
            [
                {"subject": "b", "predicate": "p", "value": v, "space": "org", "actor": "a"}
                for v in VALUES
            ]
        )
        for event in [*facts, *batch]:
            _kid(shredded, event.fact_id)
            fact = shredded.get(event.fact_id)
            assert fact is not None and fact.value == event.fact.value
        raw = "\n".join(e.to_json() for e in _inner(shredded).iter_events())
        assert MARK not in raw and "日本" not in raw

    @rule("EB-S-forget")
    def test_shred_forget_destroys_key(self, shredded: Ledger) -> None:
        """Forget keeps SPEC 2.5's digest of the plaintext, rewrites the assert as in plain mode
        (value null, ``forgotten``) and destroys the fact's key; other keys stay.

        Troubleshooting: ``forget`` must rewrite every assert of the fact in the same
        transaction as the forget event, as in plain mode.
        """
        value = VALUES[1]
        a = self._assert(shredded, value=value)
        b = self._assert(shredded, subject="other", value=VALUES[0])
        kid_a, kid_b = _kid(shredded, a.fact_id), _kid(shredded, b.fact_id)
        event = shredded.forget(fact_id=a.fact_id, actor="x", reason="r")
        assert (event.value_digest, event.digest_kind) == value_digest(value, forget_key=None)
        keys = shredded.backend.keystore()
        assert keys.get([kid_a, kid_b]).keys() == {kid_b}, "forget left the key"
        assert keys.doomed() == {}
        stored = _inner(shredded).get_assert(a.fact_id)
        assert stored is not None and stored.fact.value is None and stored.fact.forgotten
        fact = shredded.get(a.fact_id)
        assert fact is not None and fact.value is None and fact.forgotten == stored.fact.forgotten
        assert shredded.as_of(subject="other")[0].value == VALUES[0]
        ran = shredded.sweep(before=shredded.now(), actor="x", reason="retention")
        assert [e.fact_id for e in ran.forgotten] == [b.fact_id]
        assert keys.get([kid_b]) == {}

    @rule("EB-S-earlier-copy")
    def test_shred_earlier_copy_opens_nothing(
        self, shredded: Ledger, store_factory: StoreFactory, key_store_factory: KeyStoreFactory
    ) -> None:
        """A copy of the backend's events taken before a forget and restored after it reads
        the forgotten fact as null (its key is gone) and every other fact in full; forgetting
        it again needs ``keep_digest=False`` (no digest can be computed).

        Troubleshooting: ``append`` must accept events exactly as exported (``iter_events``).
        """
        gone = self._assert(shredded, value=VALUES[0])
        kept = self._assert(shredded, subject="kept", value=VALUES[2])
        copy = list(_inner(shredded).iter_events())
        shredded.forget(fact_id=gone.fact_id, actor="x", reason="r")
        restored = store_factory("shred-restored")
        with restored.transaction():
            restored.append(copy)
        keys = shredded.backend.keystore()
        with self._open(restored, key_store_factory, key_store=keys) as old:
            fact = old.get(gone.fact_id)
            assert fact is not None and fact.value is None and fact.forgotten is None
            assert [f.value for f in old.as_of(subject="kept")] == [VALUES[2]]
            assert VALUES[0] not in "\n".join(e.to_json() for e in old.export())
            with pytest.raises(LedgerError, match="keep_digest=False") as info:
                old.forget(fact_id=gone.fact_id, actor="x", reason="again")
            assert info.value.code == "key_missing"
            event = old.forget(fact_id=gone.fact_id, actor="x", reason="again", keep_digest=False)
            assert event.digest_kind == "none"
        assert shredded.get(kept.fact_id) is not None

    @rule("EB-S-recover")
    def test_shred_recover_settles_doomed_keys(
        self, store_factory: StoreFactory, key_store_factory: KeyStoreFactory, clock: StepClock
    ) -> None:
        """A key doomed by a committed forget but not destroyed (a crash in between) is
        destroyed when the ledger is opened next; a key doomed by a forget that never committed
        is kept, and its value still reads.

        Troubleshooting: ``events_for`` must show the rewritten assert (``forgotten`` set) to a
        reader that opens the location after the forget committed.
        """
        backend = store_factory("shred-recover")
        keys = _keys_of(backend, key_store_factory)
        try:
            self._recover(backend, keys, store_factory, key_store_factory, clock)
        finally:
            keys.close()

    def _recover(
        self,
        backend: EventBackend,
        keys: KeyStore,
        store_factory: StoreFactory,
        key_store_factory: KeyStoreFactory,
        clock: StepClock,
    ) -> None:
        # Both attempts fail: after the commit, and again in the compaction that follows.
        failing = _DestroyFails(keys, times=2)
        with self._open(backend, key_store_factory, key_store=failing, clock=clock) as ledger:
            a = self._assert(ledger, value=VALUES[0])
            b = self._assert(ledger, subject="live", value=VALUES[1])
            kid_a, kid_b = _kid(ledger, a.fact_id), _kid(ledger, b.fact_id)
            with pytest.raises(KeyStoreError, match="not destroyed yet"):
                ledger.forget(fact_id=a.fact_id, actor="x", reason="r")
            assert keys.get([kid_a]) and keys.doomed() == {kid_a: a.fact_id}
            fact = ledger.get(a.fact_id)
            assert fact is not None and fact.value is None, "the forget did not commit"
            keys.doom({kid_b: b.fact_id})  # as if a forget of b died before its commit
        with self._open(store_factory("shred-recover"), key_store_factory, key_store=keys) as again:
            assert keys.get([kid_a, kid_b]).keys() == {kid_b}
            assert keys.doomed() == {}
            fact = again.get(b.fact_id)
            assert fact is not None and fact.value == VALUES[1]

    @rule("EB-S-rollback")
    def test_shred_failed_section_settles_key(self, shredded: Ledger) -> None:
        """After a write section that failed once its forget was done, the key exists exactly
        when the fact still reads unforgotten (value intact), and no intent is left behind.

        Troubleshooting: whether a forget inside a failed section stands is the backend's own
        rule (a database rolls it back; the JSONL file replace already happened); ``events_for``
        must tell the truth about it once the section has ended.
        """
        a = self._assert(shredded, value=VALUES[4])
        kid = _kid(shredded, a.fact_id)
        forgotten = Forgotten(None, "none", shredded.now())
        event = ForgetEvent("e-x", forgotten.at, a.fact_id, "x", "r", digest_kind="none")
        with pytest.raises(RuntimeError), shredded.backend.transaction():
            shredded.backend.forget(a.fact_id, forgotten, event)
            raise RuntimeError("boom")
        keys = shredded.backend.keystore()
        fact = shredded.get(a.fact_id)
        assert fact is not None and keys.doomed() == {}
        if fact.forgotten is None:
            assert keys.get([kid]) and fact.value == VALUES[4]
        else:
            assert keys.get([kid]) == {} and fact.value is None

    @rule("EB-S-reopen-shared")
    def test_shred_reopen_and_share(
        self, store_factory: StoreFactory, key_store_factory: KeyStoreFactory, clock: StepClock
    ) -> None:
        """Values survive close and reopen with the default key store; two open instances read
        each other's values, and a forget by one reads as null in the other.

        Troubleshooting: ``keystore()`` with no location must name the same place every time.
        """
        with self._open(store_factory("shred-reopen"), key_store_factory, clock=clock) as one:
            a = self._assert(one, value=VALUES[1])
        with (
            self._open(store_factory("shred-reopen"), key_store_factory, clock=clock) as one,
            self._open(store_factory("shred-reopen"), key_store_factory, clock=clock) as two,
        ):
            fact = two.get(a.fact_id)
            assert fact is not None and fact.value == VALUES[1]
            b = self._assert(two, subject="two", value=VALUES[2])
            assert [f.value for f in one.as_of(subject="two")] == [VALUES[2]]
            one.forget(fact_id=b.fact_id, actor="x", reason="r")
            gone = two.get(b.fact_id)
            assert gone is not None and gone.value is None

    @rule("EB-S-restored-keys")
    def test_shred_restored_key_is_found_and_destroyed_again(self, shredded: Ledger) -> None:
        """With the key store's erasure log, a forgotten fact's key put back in the key store
        (its backup from before the forget restored alone) is found and destroyed again; the
        key of a fact the ledger does not record forgotten (its forget failed) never is.

        Troubleshooting: ``doom`` must log each key id with its fact, durably and no later than
        the forget commits, where the events' backups carry it; ``buried`` reads it back (fact
        id -> key ids). Skipped when the key store does not override ``KeyStore.buried``.
        """
        backend, keys = shredded.backend, shredded.backend.keystore()
        assert isinstance(backend, ShreddingBackend), "the ledger is not in crypto-shred mode"
        if type(keys).buried is KeyStore.buried:
            pytest.skip("this backend's key store keeps no erasure log (KeyStore.buried)")
        gone, live = (self._assert(shredded, subject=s, value=s).fact_id for s in ("g", "l"))
        kids = {f: _kid(shredded, f) for f in (gone, live)}
        backup = keys.get([kids[gone]])  # the key store's backup, taken before the forget
        shredded.forget(fact_id=gone, actor="x", reason="r")
        assert kids[gone] in keys.buried().get(gone, []), "the forget logged no key"
        keys.doom({kids[live]: live})  # a forget of ``live`` that then failed: its key spared
        keys.spare([kids[live]])
        assert backend.destroy_restored_keys() == {}
        keys.put(backup)  # restored alone
        assert backend.destroy_restored_keys(dry_run=True) == {gone: [kids[gone]]}
        assert keys.get([kids[gone]]), "a dry run destroyed the key"
        assert backend.destroy_restored_keys() == {gone: [kids[gone]]}
        assert keys.get(list(kids.values())).keys() == {kids[live]}
        fact = shredded.get(live)
        assert fact is not None and fact.value == "l"


def _keys_of(backend: EventBackend, factory: KeyStoreFactory) -> KeyStore:
    chosen = factory(backend)
    return chosen if isinstance(chosen, KeyStore) else backend.keystore(chosen)


def _script(book: Ledger) -> list[str]:
    """The same calls on any ledger: supersession chains, retraction, confirm, hold, forget,
    sweep, a batch; returns the transaction times read between them."""
    marks = [book.now()]
    a = book.assert_fact(
        subject="acct:1", predicate="plan", value=VALUES[0], space="org", actor="a",
        fact_id="f-a", valid_from="2026-01-01T00:00:00Z",
    )  # fmt: skip
    marks.append(book.now())
    b = book.assert_fact(
        subject="acct:1", predicate="plan", value=VALUES[1], space="org", actor="a",
        fact_id="f-b", supersedes=a.fact_id, valid_from="2026-03-01T00:00:00Z",
    )  # fmt: skip
    book.assert_fact(
        subject="acct:1", predicate="plan", value=VALUES[2], space="org", actor="a",
        fact_id="f-c", supersedes=b.fact_id, valid_from="2026-04-01T00:00:00Z",
    )  # fmt: skip
    marks.append(book.now())
    book.retract(fact_id=b.fact_id, actor="a", reason="wrong")
    marks.append(book.now())
    book.assert_fact(
        subject="acct:2", predicate="seats", value=VALUES[3], space="old", actor="a",
        fact_id="f-d", valid_from="2026-01-15T00:00:00Z",
    )  # fmt: skip
    book.confirm(fact_id="f-d", actor="a")
    book.assert_many(
        [
            {"subject": f"acct:{i}", "predicate": "p", "value": v, "space": "old", "actor": "a",
             "fact_id": f"f-m{i}", "valid_from": "2026-01-20T00:00:00Z"}
            for i, v in enumerate(VALUES[4:], start=3)
        ]
    )  # fmt: skip
    book.hold(fact_id="f-m3", actor="a", reason="case")
    marks.append(book.now())
    book.forget(fact_id=a.fact_id, actor="a", reason="erase")
    marks.append(book.now())
    book.forget(fact_id="f-c", actor="a", reason="erase", keep_digest=False)
    book.sweep(before=book.now(), space="old", actor="a", reason="retention")
    marks.append(book.now())
    book.release(fact_id="f-m3", actor="a", reason="closed")
    book.forget(fact_id="f-m3", actor="a", reason="erase")
    marks.append(book.now())
    return marks
