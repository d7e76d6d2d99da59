"""The Python API: a custody ledger, then the same flows with a write-through store.

Part 1 uses ``Ledger`` alone: write, supersede, a bitemporal read (what was true then, and what
we knew then), retract, a legal hold that blocks a forget, and the forget itself. Part 2 wraps a
ledger and a store in ``Custody``: every write lands in the store too, a supersession swaps the
value there, a retraction puts the old value back, and a forget removes it, verified.

    pip install agent-custody-state      # or, in this repository: uv run python examples/python_api.py
    python examples/python_api.py        # works in a temporary folder, removed at the end

Every claim the script prints is also asserted, so it fails loudly if the library disagrees.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from agent_custody_state import AssertRequest, Ledger, LedgerError
from agent_custody_state.stores.flows import Custody
from agent_custody_state.stores.inprocess import InProcessStore

# A real deployment reads the forget key from the environment (never from code): with it, the
# digest a forget keeps is an HMAC that nobody without the key can test guesses against.
FORGET_KEY = "example-only-forget-key"


def say(label: str, text: object) -> None:
    print(f"  {label:<42} {text}")


def show(label: str, facts: list) -> None:
    say(label, ", ".join(f"{f.predicate}={f.value!r}" for f in facts) or "(nothing)")


def ledger_tour(folder: Path) -> None:
    print("1. The ledger (ledger.sqlite; .jsonl works the same)")
    with Ledger(folder / "ledger.sqlite", forget_key=FORGET_KEY) as ledger:
        pro = ledger.assert_fact(
            subject="acct:42",
            predicate="plan",
            value="pro",
            space="org",
            actor="support-agent",
            receipt_id="rcpt-1",
            valid_from="2026-01-01T00:00:00Z",
        )
        # Transaction time has millisecond resolution, and writes in one millisecond share an
        # instant (docs/time.md): the pause keeps the read "as of pro's write" below from also
        # seeing the correction.
        time.sleep(0.002)
        enterprise = ledger.assert_fact(
            subject="acct:42",
            predicate="plan",
            value="enterprise",
            space="org",
            actor="support-agent",
            receipt_id="rcpt-2",
            valid_from="2026-03-01T00:00:00Z",
            supersedes=pro.fact_id,
        )
        now = ledger.as_of(subject="acct:42")
        show("believed now:", now)
        assert [f.value for f in now] == ["enterprise"]

        # Valid time: what was true on 1 February, as the ledger knows it today.
        february = ledger.as_of(subject="acct:42", valid_at="2026-02-01T00:00:00Z")
        show("true on 2026-02-01:", february)
        assert [f.value for f in february] == ["pro"]
        # Transaction time: what the ledger believed right after the first write.
        known_then = ledger.as_of(subject="acct:42", tx_at=pro.tx_time)
        show("believed when 'pro' was written:", known_then)
        assert [f.value for f in known_then] == ["pro"]

        ledger.retract(fact_id=enterprise.fact_id, actor="ops", reason="wrong account")
        after_retract = ledger.as_of(subject="acct:42")
        show("after retracting 'enterprise':", after_retract)
        assert [f.value for f in after_retract] == ["pro"]

        ledger.hold(fact_id=pro.fact_id, actor="legal", reason="litigation 2026-17")
        try:
            ledger.forget(fact_id=pro.fact_id, actor="dpo", reason="GDPR art. 17")
        except LedgerError as refused:
            say("forget under a legal hold is refused:", f"{refused.code}: {refused}")
            assert refused.code == "on_hold"
        else:
            raise AssertionError("a forget under a legal hold went through")
        ledger.release(fact_id=pro.fact_id, actor="legal", reason="case closed")

        certificate = ledger.forget(fact_id=pro.fact_id, actor="dpo", reason="GDPR art. 17")
        digest = f"{certificate.digest_kind} {certificate.value_digest[:16]}..."
        say("forgotten; the certificate keeps a digest:", digest)
        gone = ledger.get(pro.fact_id)
        assert gone is not None and gone.value is None and gone.forgotten is not None
        kinds = [event.kind for event in ledger.history(pro.fact_id)]
        say("the events about 'pro' are kept:", " -> ".join(kinds))
        assert kinds[0] == "assert" and kinds[-1] == "forget"


async def custody_tour(folder: Path) -> None:
    print("2. Custody: the ledger and a write-through store, moved together")
    store = InProcessStore("notes")  # the builtin reference store: a dict standing in for a vendor
    with Ledger(folder / "custody.jsonl") as ledger:
        custody = Custody(ledger, [store])

        def in_store() -> list:
            return sorted(row["value"] for row in store.vendor.rows.values())

        first = await custody.write(
            AssertRequest(
                subject="user:7",
                predicate="city",
                value="Lisbon",
                space="team:care",
                actor="intake-agent",
                receipt_id="rcpt-10",
            )
        )
        say("written; the store's id is on the fact:", first.event.fact.external)
        assert first.event.fact.external is not None and "notes" in first.event.fact.external
        assert in_store() == ["Lisbon"]

        second = await custody.write(
            AssertRequest(
                subject="user:7",
                predicate="city",
                value="Porto",
                space="team:care",
                actor="intake-agent",
                receipt_id="rcpt-11",
                supersedes=first.event.fact_id,
            )
        )
        assert second.mirror is not None
        say("superseded; the store holds:", in_store())
        assert in_store() == ["Porto"]

        undo = await custody.retract(
            fact_id=second.event.fact_id, actor="ops", reason="the move was cancelled"
        )
        say("retracted; removal:", undo.removal.verification)
        say("the old value is back in the store:", in_store())
        assert undo.removal.verification == {"notes": "verified"}
        assert in_store() == ["Lisbon"]

        erased = await custody.forget(
            fact_id=first.event.fact_id, actor="dpo", reason="erasure request"
        )
        say("forgotten; removal:", erased.removal.verification)
        say("the store holds:", in_store())
        assert erased.removal.verification == {"notes": "verified"}
        assert in_store() == []


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="agent-custody-example-") as folder:
        ledger_tour(Path(folder))
        asyncio.run(custody_tour(Path(folder)))
    print("done.")


if __name__ == "__main__":
    main()
