"""``eval``: the memory-mutation harness (SPEC-EXTRAS 6.1 to 6.4).

It scores a memory system on what goes wrong *after* writes, not on recall: stale values served
after a correction, contradictions believed at once, and reads that return the value of a write
the scenario marks bad. Any system behind the small ``MemoryUnderTest`` interface is scored the
same way: the ledger, and a naive overwrite store that scores badly for the right reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_custody_state.canonical import js_json
from agent_custody_state.extras.jsview import MISSING, at, has, pad, text
from agent_custody_state.ledger.ledger import Ledger

TOTAL_KEYS = ("reads", "staleReads", "contradictions", "blastRadius", "correctReads")


class MemoryUnderTest(Protocol):
    """What the harness needs; reads return what the system would give an agent right now."""

    def write(self, item: dict[str, Any]) -> str: ...

    def read(self, query: dict[str, Any]) -> list[dict[str, Any]]: ...

    def retract(self, fact_id: str, actor: str, reason: str) -> None: ...


def _w(key: str, subject: str, predicate: str, value: Any, **more: Any) -> dict[str, Any]:
    return {
        "op": "write",
        "key": key,
        "subject": subject,
        "predicate": predicate,
        "value": value,
        **more,
    }


def _r(subject: str, predicate: str, expect: Any) -> dict[str, Any]:
    return {"op": "read", "subject": subject, "predicate": predicate, "expect": expect}


#: The four built-in scenarios (names exact): memory incidents a platform owner has had.
SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "correction: a superseded value must stop being served",
        "ops": [
            _w("a", "acct:42", "plan", "pro"),
            _r("acct:42", "plan", "pro"),
            _w("b", "acct:42", "plan", "enterprise", supersedes="a"),
            _r("acct:42", "plan", "enterprise"),
        ],
    },
    {
        "name": "contradiction: two writers, one belief",
        "ops": [
            _w("a", "acct:42", "owner", "dana", actor="support"),
            _w("b", "acct:42", "owner", "mallory", actor="intern", supersedes="a"),
            _r("acct:42", "owner", "mallory"),
            {"op": "retract", "key": "b", "reason": "poisoned tool result"},
            _r("acct:42", "owner", "dana"),
        ],
    },
    {
        "name": "blast radius: a bad write is retracted and must not be served afterwards",
        "ops": [
            _w("good", "acct:7", "credit_limit", 1000),
            _w("bad", "acct:7", "credit_limit", 1000000, supersedes="good", bad=True),
            _r("acct:7", "credit_limit", 1000000),
            _r("acct:7", "credit_limit", 1000000),
            {"op": "retract", "key": "bad"},
            _r("acct:7", "credit_limit", 1000),
            _r("acct:7", "credit_limit", 1000),
        ],
    },
    {
        "name": "retraction with nothing underneath: the belief must disappear, not linger",
        "ops": [
            _w("a", "deal:9", "status", "signed", bad=True),
            _r("deal:9", "status", "signed"),
            {"op": "retract", "key": "a"},
            _r("deal:9", "status", None),
        ],
    },
]


class LedgerUnderTest:
    """The ledger: attested writes, attested reads now, retractions."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def write(self, item: dict[str, Any]) -> str:
        event = self.ledger.assert_fact(provenance="attested", **item)
        return event.fact_id

    def read(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        facts = self.ledger.as_of(include="attested", **query)
        return [{"subject": f.subject, "predicate": f.predicate, "value": f.value} for f in facts]

    def retract(self, fact_id: str, actor: str, reason: str) -> None:
        self.ledger.retract(fact_id=fact_id, actor=actor, reason=reason)


@dataclass
class OverwriteStore:
    """A key-value memory that overwrites on write and deletes on retract, the shape most memory
    layers have: a retraction leaves a hole where the earlier belief should return."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    n: int = 0

    def write(self, item: dict[str, Any]) -> str:
        self.n += 1
        fact_id = f"m{self.n}"
        row = {
            "id": fact_id,
            "subject": item["subject"],
            "predicate": item["predicate"],
            "value": item["value"],
        }
        self.rows[f"{item['space']}|{item['subject']}|{item['predicate']}"] = row
        return fact_id

    def read(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        predicate = query.get("predicate")
        return [
            {"subject": r["subject"], "predicate": r["predicate"], "value": r["value"]}
            for r in self.rows.values()
            if r["subject"] == query["subject"] and (not predicate or r["predicate"] == predicate)
        ]

    def retract(self, fact_id: str, actor: str, reason: str) -> None:
        for key in [k for k, r in self.rows.items() if r["id"] == fact_id]:
            del self.rows[key]


def _same(a: Any, b: Any) -> bool:
    """Equality as compact JavaScript JSON text (key order matters, ``1`` equals ``1.0``)."""
    return js_json(a) == js_json(b)


def run_scenario(system: MemoryUnderTest, scenario: dict[str, Any]) -> dict[str, Any]:
    ids: dict[str, str] = {}
    bad: list[Any] = []
    score: dict[str, Any] = {
        "name": scenario["name"],
        **dict.fromkeys(TOTAL_KEYS, 0),
        "failures": [],
    }
    for i, op in enumerate(scenario["ops"]):
        try:
            _run_op(system, op, ids, bad, score)
        except Exception as exc:  # a failing op is scored, never fatal: the run goes on
            score["failures"].append(f"op {i} ({op.get('op')}): {exc}")
    return score


def _run_op(
    system: MemoryUnderTest,
    op: dict[str, Any],
    ids: dict[str, str],
    bad: list[Any],
    score: dict[str, Any],
) -> None:
    kind = op["op"]
    if kind == "write":
        supersedes = ids.get(op["supersedes"]) if op.get("supersedes") else None
        if op.get("supersedes") and not supersedes:
            raise ValueError(f"write {op['key']} supersedes unknown key {op['supersedes']}")
        item = {
            "subject": op["subject"],
            "predicate": op["predicate"],
            "value": op.get("value"),
            "space": op.get("space") or "org",
            "actor": op.get("actor") or "agent",
        }
        if supersedes:
            item["supersedes"] = supersedes
        ids[op["key"]] = system.write(item)
        if op.get("bad"):
            bad.append(op.get("value"))
    elif kind == "retract":
        fact_id = ids.get(op["key"])
        if not fact_id:
            raise ValueError(f"retract of unknown key {op['key']}")
        system.retract(fact_id, op.get("actor") or "admin", op.get("reason") or "wrong")
    else:
        score["reads"] += 1
        query = {"subject": op["subject"]}
        query.update({k: op[k] for k in ("predicate", "space") if op.get(k)})
        facts = system.read(query)
        values = [f["value"] for f in facts]
        by_predicate: dict[str, int] = {}
        for f in facts:
            by_predicate[f["predicate"]] = by_predicate.get(f["predicate"], 0) + 1
        if any(n > 1 for n in by_predicate.values()):
            score["contradictions"] += 1
        if any(_same(b, v) for v in values for b in bad):
            score["blastRadius"] += 1
        expect = op.get("expect")
        correct = not values if expect is None else len(values) == 1 and _same(values[0], expect)
        if correct:
            score["correctReads"] += 1
        elif (values and not any(_same(v, expect) for v in values)) or len(values) > 1:
            score["staleReads"] += 1


def run_all(system: MemoryUnderTest, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """Every scenario in order on one system instance, with totals."""
    results = [run_scenario(system, s) for s in scenarios]
    totals = {k: sum(r[k] for r in results) for k in TOTAL_KEYS}
    return {"scenarios": results, "totals": totals}


def regressed(report: dict[str, Any]) -> bool:
    """The ledger regressed: a read not correct, or any failure."""
    totals = report["totals"]
    return totals["correctReads"] < totals["reads"] or any(
        s["failures"] for s in report["scenarios"]
    )


def _row(name: Any, s: Any) -> str:
    def n(key: str) -> str:
        return f"{text(s[key] if has(s, key) else MISSING):>2}"

    return (
        f"{pad(text(name), 76)} reads {n('reads')}  correct {n('correctReads')}  "
        f"stale {n('staleReads')}  contradictions {n('contradictions')}  blast {n('blastRadius')}"
    )


def format_report(report: Any) -> str:
    """One line per scenario, each failure below its scenario, then the TOTAL row. Tolerant of a
    report read back from a signed file (a missing number prints as ``undefined``)."""
    lines = []
    scenarios = at(report, "scenarios")
    for s in scenarios if isinstance(scenarios, list) else []:
        lines.append(_row(at(s, "name"), s))
        failures = at(s, "failures")
        lines.extend(f"    ! {text(f)}" for f in (failures if isinstance(failures, list) else []))
    lines.append(_row("TOTAL", at(report, "totals")))
    return "\n".join(lines)
