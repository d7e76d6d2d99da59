"""Event-backend rules for the tamper-evident chain (``docs/proofs.md``).

The ledger computes the chain; a backend's part is small and exact: ``last_event`` must be the
event appended last (this write section's included), ``stored_events`` must return every event
as stored, in append order, and a forget must rewrite the assert exactly as ``forget_assert``
builds it (salt gone, commitment and chain record kept). A checkpoint log, if the backend keeps
one, must keep every note in order across reopening.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_custody_state import Ledger
from agent_custody_state.ledger.chain import head_after
from agent_custody_state.ledger.checkpoints import read_checkpoints
from agent_custody_state.ledger.model import event_from_dict
from agent_custody_state.ledger.parallel import verify_parallel, verify_stored, worker_pool
from agent_custody_state.ledger.verify import verify_lines

from ..clock import StepClock
from ..rules import rule
from .base import BackendRules, StoreFactory, original_assert

__all__ = ["ChainRules"]


def _verify(ledger: Ledger) -> None:
    report = verify_lines(ledger.backend.stored_events())
    assert report.ok, report.problems[:5]
    assert report.events == ledger.count()


class ChainRules(BackendRules):
    """The chain over any backend: records, heads, forget, genesis, checkpoints."""

    __suite_root__ = True

    @rule("CH-1")
    def test_every_event_is_chained(self, ledger: Ledger) -> None:
        """Every event the ledger writes carries a chain record with its position, and the
        stored events verify: every leaf, link and commitment.

        Troubleshooting: ``stored_events`` must yield every event's stored JSON text (or its
        ``to_json()``) in append order, and ``append`` must store unknown keys (``chain``,
        ``valueSalt``, ``valueCommitment``) as they are.
        """
        a = self._assert(ledger, value={"tier": "pro", "n": [1, 2.5]})
        ledger.assert_many([{**self._args(), "subject": f"s{i}", "value": i} for i in range(3)])
        ledger.retract(fact_id=a.fact_id, actor="x", reason="r")
        ledger.confirm(fact_id=ledger.as_of(subject="s0")[0].fact_id, actor="x")
        stored = [json.loads(text) for text in ledger.backend.stored_events()]
        assert [d["chain"]["seq"] for d in stored] == [1, 2, 3, 4, 5, 6]
        assert [d["eventId"] for d in stored] == [e.event_id for e in ledger.export()]
        assert ledger.chain_head().seq == 6
        assert ledger.chain_head().hash == stored[-1]["chain"]["head"]
        _verify(ledger)

    @rule("CH-2")
    def test_last_event(self, ledger: Ledger) -> None:
        """``last_event`` is None for an empty ledger, then the event appended last, including
        one appended earlier in the same write section; a rolled-back section leaves none.

        Troubleshooting: answer from the write section's own view (uncommitted rows of the
        same connection, pending lines), ordered by append order, not by time.
        """
        backend = ledger.backend
        assert backend.last_event() is None
        first = self._assert(ledger)
        last = backend.last_event()
        assert last is not None and last.event_id == first.event_id
        event = ledger.validate_assert(**self._args(subject="pending"))
        with pytest.raises(RuntimeError), backend.transaction():
            backend.append([event])
            inside = backend.last_event()
            assert inside is not None and inside.event_id == event.event_id
            raise RuntimeError("roll back")
        last = backend.last_event()
        assert last is not None and last.event_id == first.event_id
        second = self._assert(ledger, subject="after")
        assert ledger.chain_head().seq == 2
        assert json.loads(list(backend.stored_events())[-1])["eventId"] == second.event_id
        _verify(ledger)

    @rule("CH-3")
    def test_forget_keeps_the_chain(self, ledger: Ledger, clock: StepClock) -> None:
        """A forget or a sweep changes no leaf: the chain still verifies, the forgotten asserts
        keep their commitment and chain record and lose their salt.

        Troubleshooting: rewrite the assert exactly as ``forget_assert`` builds it; keep the
        event's other keys as they are.
        """
        a = self._assert(ledger, value="secret-a")
        b = self._assert(ledger, subject="b", value="secret-b")
        before = {d["eventId"]: d["chain"] for d in map(json.loads, ledger.backend.stored_events())}
        ledger.forget(fact_id=a.fact_id, actor="x", reason="gdpr")
        soon = clock.now + timedelta(seconds=1)
        ledger.sweep(before=soon, actor="x", reason="retention", keep_digest=False)
        stored = [json.loads(text) for text in ledger.backend.stored_events()]
        for data in stored[:2]:
            assert data["chain"] == before[data["eventId"]]
            assert data["fact"]["value"] is None and "valueSalt" not in data["fact"]
            assert len(data["fact"]["valueCommitment"]) == 64
        assert "secret" not in "".join(json.dumps(d) for d in stored)
        assert ledger.get(b.fact_id).forgotten is not None  # type: ignore[union-attr]
        _verify(ledger)

    @rule("CH-4")
    def test_genesis_after_unchained_events(self, ledger: Ledger) -> None:
        """Events written without the chain (as the TypeScript original writes them) are kept
        as they are; the next chained event records a genesis committing to all of them.

        Troubleshooting: ``last_event`` must return the event as stored (without a chain
        record here), so the ledger knows the chain starts.
        """
        raw = original_assert("original-1")
        with ledger.backend.transaction():
            ledger.backend.append([event_from_dict(raw)])
        head = ledger.chain_head()
        assert (head.seq, head.chained) == (1, False)
        self._assert(ledger, subject="after")
        stored = [json.loads(text) for text in ledger.backend.stored_events()]
        assert stored[0] == raw
        assert stored[1]["chain"]["genesis"] == {"size": 1, "head": head.hash}
        ledger.forget(fact_id=raw["fact"]["factId"], actor="x", reason="r")
        _verify(ledger)

    @rule("CH-5")
    def test_checkpoints(
        self, store_factory: StoreFactory, clock: StepClock, tmp_path: Path
    ) -> None:
        """Signed checkpoints every N events and on demand verify against the chain; a backend
        that keeps them itself (``checkpoint_log``) keeps every note, in order, across
        reopening (otherwise they go to the file given).

        Troubleshooting: ``add`` must store the note text exactly; ``notes`` returns them
        oldest first (an empty list before the first).
        """
        key = Ed25519PrivateKey.generate()
        backend = store_factory("checkpoints")
        where = None if backend.checkpoint_log() is not None else tmp_path / "checkpoints.txt"
        options: dict[str, Any] = {"checkpoint_key": key, "checkpoints": where}
        with Ledger(backend, clock=clock, checkpoint_every=2, **options) as ledger:
            for i in range(5):
                self._assert(ledger, subject=f"s{i}")
            ledger.checkpoint()
        with Ledger(store_factory("checkpoints"), clock=clock, **options) as again:
            log = again.backend.checkpoint_log() if where is None else None
            notes = log.notes() if log is not None else [where.read_text()]  # type: ignore[union-attr]
            cps = read_checkpoints("\n".join(notes))
            assert [cp.size for cp in cps] == [2, 4, 5]
            report = verify_lines(
                again.backend.stored_events(), checkpoints=cps, public_key=key.public_key()
            )
            assert report.ok and report.checkpoints_checked == 3, report.problems

    @rule("CH-6")
    def test_parallel_verify(self, ledger: Ledger) -> None:
        """``verify`` in worker processes, over chunks of the stored events, gives the report
        of the sequential pass: on the intact chain (every chunk taken from its worker) and
        with one event edited, its forget in a later chunk than its assert.

        Troubleshooting: ``stored_events`` must give the same events, in the same order, each
        time it is called, and as text a worker process can receive (``str`` or ``bytes``).
        """
        ids = [self._assert(ledger, subject=f"s{i}", value=i).fact_id for i in range(8)]
        ledger.forget(fact_id=ids[1], actor="x", reason="r")
        ledger.retract(fact_id=ids[2], actor="x", reason="r")
        stored = list(ledger.backend.stored_events())
        stats: dict[str, int] = {}
        with worker_pool(2) as pool:
            report = verify_parallel(stored, executor=pool, chunk=3, stats=stats)
            assert asdict(report) == asdict(verify_lines(stored))
            assert report.ok and stats == {"merged": 4, "rerun": 0}
            edited = json.loads(stored[1])
            edited["fact"]["forgotten"]["at"] = "2000-01-01T00:00:00.000Z"
            stored[1] = json.dumps(edited, separators=(",", ":"))
            report = verify_parallel(stored, executor=pool, chunk=3)
        assert asdict(report) == asdict(verify_lines(stored))
        assert report.first is not None and report.first.seq == 2

    @rule("CH-7")
    def test_two_instances_keep_one_chain(
        self, store_factory: StoreFactory, clock: StepClock
    ) -> None:
        """Two backends opened on one location (two connections in one process), writing in
        turns (asserts, batches, a forget), keep one chain: each one's next event links to the
        other's last, and both report the same head.

        Troubleshooting: a backend that remembers the chain head or the last event between
        write sections must notice the other connection's commits (SQLite: ``PRAGMA
        data_version``) and stop answering from memory once it has written again itself.
        """
        with (
            Ledger(store_factory("shared"), clock=clock) as one,
            Ledger(store_factory("shared"), clock=clock) as two,
        ):
            first = self._assert(one, subject="first")
            if two.count() == 0:
                pytest.skip("two instances of this backend on one name share no storage")
            for i in range(3):
                self._assert(one, subject=f"one-{i}")
                self._assert(two, subject=f"two-{i}")
                two.assert_many([{**self._args(), "subject": f"b{i}-{j}"} for j in range(2)])
                self._assert(one, subject=f"one-{i}-again")
            two.forget(fact_id=first.fact_id, actor="x", reason="r")
            self._assert(one, subject="last")
            assert one.chain_head() == two.chain_head()
            assert one.chain_head().seq == one.count() == 18
            _verify(two)

    @rule("CH-8")
    def test_head_after_events_of_the_original(
        self, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Events written without the chain between chained ones (the TypeScript original
        writing the same ledger) are linked in by the next chained event, which reads back only
        to the last chain record: the head is the one a pass from the start computes, the
        ledger verifies, and ``events_newest_first`` (optional: None when not offered) gives
        every event in reverse append order; ``first_event`` (which names the ledger in
        checkpoints and certificates) is the first of ``iter_events``, None while empty.

        Troubleshooting: ``events_newest_first`` must yield exactly ``iter_events`` reversed,
        lazily (a writer stops at the first event with a chain record), or return None.
        """
        assert ledger.backend.first_event() is None
        for i in range(3):
            self._assert(ledger, subject=f"ours-{i}")
            with ledger.backend.transaction():
                ledger.backend.append(
                    [event_from_dict(original_assert(f"o{i}-{j}")) for j in range(i + 1)]
                )
            whole = head_after(ledger.backend.last_event(), ledger.backend.stored_events)
            assert ledger.chain_head() == whole
        backwards = ledger.backend.events_newest_first()
        events = list(ledger.backend.iter_events())
        assert ledger.backend.first_event() == events[0]
        if backwards is not None:
            assert [e.event_id for e in backwards] == [e.event_id for e in reversed(events)]

            def whole_ledger() -> None:
                raise AssertionError("the head was computed from the whole ledger")

            monkeypatch.setattr(ledger.backend, "stored_events", whole_ledger)
        head = ledger.chain_head()
        assert (head.seq, head.chained) == (len(events), False)
        self._assert(ledger, subject="last")
        monkeypatch.undo()
        _verify(ledger)

    @rule("CH-9")
    def test_an_intact_ledger_has_no_index_problems(self, ledger: Ledger) -> None:
        """``index_problems`` (what ``verify`` adds beyond the chain: the backend's own index,
        such as SQL's query columns, against its stored events) finds nothing on a ledger the
        ledger wrote: every kind of event, a supersession, a forget.

        Troubleshooting: a backend whose index is derived from the stored text keeps the
        default (``[]``); one that keeps its own copy (columns, a side index) compares it with
        each stored event and names the position (from 1) of each one that differs, with no
        difference reported where the two hold the same thing.
        """
        first = self._assert(ledger, subject='a\u00e9 "q"')
        second = self._assert(ledger, subject='a\u00e9 "q"', value="x", supersedes=first.fact_id)
        other = self._assert(ledger, subject="b", space="team:\u65e5")
        ledger.confirm(fact_id=second.fact_id, actor="x")
        ledger.hold(fact_id=other.fact_id, actor="x", reason="case")
        ledger.release(fact_id=other.fact_id, actor="x", reason="closed")
        ledger.retract(fact_id=second.fact_id, actor="x", reason="r")
        ledger.forget(fact_id=other.fact_id, actor="x", reason="gdpr")
        assert ledger.backend.index_problems() == []
        _verify(ledger)

    @rule("CH-10")
    def test_stored_chunks_read_elsewhere_give_the_same_report(self, ledger: Ledger) -> None:
        """A backend offering ``stored_chunks`` (chunks ``verify``'s worker processes read
        themselves) cuts every stored event into exactly one chunk, in order, each holding the
        count it was cut with; read in worker processes they give the report of the events
        read here (``verify_lines`` over ``stored_events``), with no index problem.

        Troubleshooting: a chunk is pickled to another process, so it holds what opens the
        ledger again (a path, a URL), never an open connection; it covers only the events
        stored when ``stored_chunks`` was called, and its ``read`` returns the stored text of
        the event before it (None for the first chunk).
        """
        for i in range(7):
            self._assert(ledger, subject=f"s{i}", value=i)
        ledger.forget(fact_id=self._assert(ledger, subject="gone").fact_id, actor="x", reason="r")
        cut = ledger.backend.stored_chunks(3)
        if cut is None:
            pytest.skip("this backend offers no stored_chunks: verify reads it in one process")
        chunks = list(cut)
        stored = list(ledger.backend.stored_events())
        reads = [chunk.read() for chunk in chunks]
        assert [chunk.count for chunk in chunks] == [3, 3, 3]
        assert [line for read in reads for line in read.lines] == stored
        assert [read.before for read in reads] == [None, stored[2], stored[5]]
        assert all(read.index_problems == [] for read in reads)
        with worker_pool(2) as pool:
            report = verify_stored(chunks, executor=pool)
        assert asdict(report) == asdict(verify_lines(stored)) and report.ok

    def _args(self, **kw: object) -> dict[str, object]:
        args: dict[str, object] = {
            "subject": "acct:42",
            "predicate": "plan",
            "value": "pro",
            "space": "org",
            "actor": "agent",
        }
        args.update(kw)
        return args
