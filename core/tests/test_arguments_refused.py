"""Arguments the ledger refuses with a ``LedgerError`` (never another exception, never a
default that acts): a sweep without ``before``, a non-bool ``keep_digest``, a batch that is not a
list of facts, external ids that are not a mapping, text with a lone surrogate. Each refusal
leaves the ledger's files byte-identical (SQLite: the plugin's ``test_sqlite_refusals.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError

FACT = {"subject": "s", "predicate": "p", "value": 1, "space": "org", "actor": "a"}


def _files(folder: Path) -> dict[str, str]:
    """The ledger's bytes; SQLite's ``-shm`` (the WAL's shared-memory index, rebuilt by any
    reader, no data) and the lock file are left out."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.name.endswith(("-shm", ".lock"))
    }


CASES: list[tuple[str, Callable[[Ledger, str], Any], str]] = [
    ("sweep", lambda led, f: led.sweep(before=None, actor="a", reason="r"), "before is required"),
    ("plan", lambda led, f: led.plan_sweep(None), "before is required"),
    ("learned", lambda led, f: led.learned_before(None), "before is required"),
    (
        "keep_digest",
        lambda led, f: led.forget(fact_id=f, actor="a", reason="r", keep_digest="no"),
        "keep_digest must be true or false",
    ),
    (
        "sweep keep_digest",
        lambda led, f: led.sweep(
            before="2999-01-01T00:00:00Z", actor="a", reason="r", keep_digest=0
        ),
        "keep_digest must be true or false",
    ),
    ("batch", lambda led, f: led.assert_many(5), "items must be a list of facts, not int"),
    ("batch str", lambda led, f: led.assert_many("abc"), "items must be a list of facts, not str"),
    (
        "item",
        lambda led, f: led.assert_many([FACT, "abc"]),
        "item 1: a fact must be a mapping of assert_fact's arguments, not str",
    ),
    (
        "unknown key",
        lambda led, f: led.assert_many([{**FACT, "colour": 1}]),
        "item 0: unknown argument 'colour'",
    ),
    (
        "missing key",
        lambda led, f: led.assert_many([{k: v for k, v in FACT.items() if k != "actor"}]),
        "item 0: actor is required",
    ),
    (
        "external",
        lambda led, f: led.assert_fact(**FACT, external="x"),
        "external must map store names to string ids",
    ),
    (
        "surrogate",
        lambda led, f: led.assert_fact(**{**FACT, "subject": "a\ud800"}),
        "subject has a lone surrogate ('\\ud800'): pass valid Unicode",
    ),
    (
        "surrogate actor",
        lambda led, f: led.retract(fact_id=f, actor="\udc00", reason="r"),
        "actor has a lone surrogate ('\\udc00'): pass valid Unicode",
    ),
]


@pytest.mark.parametrize(("case", "call", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused_with_a_ledger_error_and_nothing_changed(
    tmp_path: Path, case: str, call: Callable[[Ledger, str], Any], message: str
) -> None:
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact = ledger.assert_fact(**FACT).fact_id
        before = _files(tmp_path)
        with pytest.raises(LedgerError) as caught:
            call(ledger, fact)
        assert str(caught.value) == message
        assert _files(tmp_path) == before
        assert ledger.get(fact) is not None and ledger.get(fact).forgotten is None  # type: ignore[union-attr]


def test_a_value_may_still_hold_a_lone_surrogate(tmp_path: Path) -> None:
    """JSON escapes it in the stored text, so values keep round-tripping on every backend."""
    with Ledger(tmp_path / "l.jsonl") as ledger:
        fact = ledger.assert_fact(**{**FACT, "value": {"k": "\ud800"}})
        assert ledger.get(fact.fact_id).value == {"k": "\ud800"}  # type: ignore[union-attr]
