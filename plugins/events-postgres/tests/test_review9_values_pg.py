"""Ninth review, PostgreSQL: a key the other backends take, this one takes; one it cannot hold
is refused with the other backends' text, before anything is written.

PostgreSQL's text refuses U+0000, and its btree indexes refuse an index row over 2,704 bytes:
both were raw driver errors at ``INSERT`` (``index row size 3024 exceeds btree version 4
maximum 2704 for index "t_subject"``), for keys JSONL and SQLite had taken. The core's side is
``core/tests/test_review9_values.py``.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from agent_custody_state import Ledger, LedgerError
from agent_custody_state.ledger.arguments import MAX_KEY_BYTES, MAX_TOPIC_BYTES
from agent_custody_state.ledger.backend import EventBackend, EventBackendError
from agent_custody_state.ledger.model import Event, event_from_json

BASE: dict[str, Any] = {"subject": "s", "predicate": "p", "space": "org", "actor": "a"}


def noise(length: int, seed: int) -> str:
    """Text PostgreSQL cannot compress, so its index row is as long as the text."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def refusal(ledger: Ledger, **changes: Any) -> str:
    with pytest.raises(LedgerError) as caught:
        ledger.assert_fact(**{**BASE, "value": 1, **changes})
    return str(caught.value)


def test_keys_up_to_the_limits_are_indexed_and_past_them_refused_as_on_memory(
    pg_factory: Callable[..., EventBackend],
) -> None:
    half = MAX_TOPIC_BYTES // 2
    with Ledger(pg_factory("keys")) as ledger, Ledger("memory:") as memory:
        for n, changes in enumerate(
            [
                {"subject": noise(MAX_KEY_BYTES, 1)},
                {"subject": noise(half, 2), "predicate": noise(half, 3)},
                {"space": noise(MAX_KEY_BYTES, 4)},
                {"fact_id": noise(MAX_KEY_BYTES, 5)},
            ]
        ):
            event = ledger.assert_fact(**{**BASE, "value": n, **changes})
            assert ledger.get(event.fact.fact_id).value == n  # type: ignore[union-attr]
        count = ledger.count()
        for changes in (
            {"subject": "a\x00b"},
            {"space": "org\x00"},
            {"fact_id": "f\x00"},
            {"subject": noise(MAX_KEY_BYTES + 1, 6)},
            {"subject": noise(half, 7), "predicate": noise(half + 1, 8)},
        ):
            text = refusal(ledger, **changes)
            assert text == refusal(memory, **changes)
            assert "raw" not in text and "btree" not in text
        assert ledger.count() == count


def _export(subject: str) -> list[Event]:
    """An unchained export (the original's form) of two asserts, the second about ``subject``."""
    lines = []
    for n, about in enumerate(("ok", subject)):
        lines.append(
            json.dumps(
                {
                    "eventId": f"e{n}",
                    "kind": "assert",
                    "txTime": "2026-12-07T00:00:00.000Z",
                    "fact": {
                        "factId": f"f{n}",
                        "subject": about,
                        "predicate": "p",
                        "value": n,
                        "space": "org",
                        "actor": "a",
                        "source": {"receiptId": None},
                        "provenance": "claimed",
                        "validFrom": "2026-12-07T00:00:00.000Z",
                        "validTo": None,
                        "confidence": None,
                    },
                    "supersedes": None,
                }
            )
        )
    return [event_from_json(line) for line in lines]


@pytest.mark.parametrize(
    ("subject", "says"),
    [
        ("a\x00b", "subject holds U+0000 (NUL), which a SQL text column cannot hold"),
        (noise(3000, 9), "subject is too long: 3000 bytes in UTF-8; the limit is 2048"),
    ],
)
def test_an_import_holding_a_key_postgres_cannot_index_names_it_and_writes_nothing(
    pg_factory: Callable[..., EventBackend], subject: str, says: str
) -> None:
    with Ledger(pg_factory("imported")) as ledger:
        with pytest.raises((EventBackendError, LedgerError)) as caught:
            ledger.import_events(_export(subject))  # the core's import check refuses it first
        assert "event 2: " + says in str(caught.value), str(caught.value)
        # Appended to the backend directly (a caller of its own): the plugin names it too.
        with pytest.raises(EventBackendError) as caught, ledger.backend.transaction():
            ledger.backend.append(_export(subject))
        assert "event 2 (e1): " + says in str(caught.value), str(caught.value)
        assert ledger.count() == 0
        ledger.import_events(_export("fine"))  # the table took nothing and takes the next
        assert ledger.count() == 2


@pytest.mark.parametrize(
    ("given", "read"),
    [(-0.0, 0), ([1.0, 2.5], [1, 2.5]), ("\ud83d\ude00", "\U0001f600"), (-1e16, -(10**16))],
)
def test_a_value_reads_the_same_here_as_on_memory(
    pg_factory: Callable[..., EventBackend], given: Any, read: Any
) -> None:
    """PostgreSQL reads the value from its JSON text (``0``, ``1``, one character); ``memory:``
    answered what it was given (``-0.0``, ``1.0``, two surrogates)."""
    with Ledger(pg_factory("read_back")) as ledger, Ledger("memory:") as memory:
        answers = []
        for live in (ledger, memory):
            event = live.assert_fact(**BASE, value=given)
            answers += [event.fact.value, live.get(event.fact.fact_id).value]  # type: ignore[union-attr]
    assert [repr(a) for a in answers] == [repr(read)] * 4


def test_a_jsonb_table_refuses_what_jsonb_cannot_hold_by_name(
    pg_factory: Callable[..., EventBackend], postgres_url: str
) -> None:
    """An older writer's table keeps events in a ``jsonb`` column, which refuses U+0000 and lone
    surrogates that JSON escapes and this backend's ``text`` column holds; the driver's
    ``unsupported Unicode escape sequence`` named neither the event nor the remedy."""
    with Ledger(pg_factory("older")) as ledger:
        ledger.assert_fact(**BASE, value=0)
    with psycopg.connect(postgres_url) as conn:
        conn.execute("ALTER TABLE older ALTER COLUMN json TYPE jsonb USING json::jsonb")
    with Ledger(pg_factory("older")) as ledger:
        for value in ("a\x00b", {"k": ["\ud800"]}, {"\x00": 1}):
            with pytest.raises(EventBackendError) as caught:
                ledger.assert_fact(**BASE, value=value)
            assert (
                "which this table's jsonb json column (an older writer's layout) cannot hold"
                in (str(caught.value))
            )
        assert ledger.count() == 1
        kept = ledger.assert_fact(**BASE, value={"text": "\\u0000 \\ud800", "pair": "\U0001f600"})
        assert ledger.get(kept.fact.fact_id).value["pair"] == "\U0001f600"  # type: ignore[union-attr]


def test_a_read_or_action_naming_a_nul_key_answers_as_on_memory(
    pg_factory: Callable[..., EventBackend],
) -> None:
    """No row can hold U+0000, so a read naming it finds nothing, as on every other backend;
    the driver refused the parameter (``PostgreSQL text fields cannot contain NUL``)."""
    with Ledger(pg_factory("reads")) as ledger, Ledger("memory:") as memory:
        for live in (ledger, memory):
            kept = live.assert_fact(**BASE, value=1).fact.fact_id
            assert live.get("f\x00") is None
            assert live.history("f\x00") == []
            assert live.as_of(subject="s\x00") == [] and live.as_of(space="org\x00") == []
            assert [f.fact_id for f in live.as_of(subject="s")] == [kept]
        answers = []
        for live in (ledger, memory):
            with pytest.raises(LedgerError) as caught:
                live.retract(fact_id="f\x00", actor="a", reason="r")
            answers.append(str(caught.value))
        assert (
            answers[0]
            == answers[1]
            == ("fact_id holds U+0000 (NUL), which a SQL text column cannot hold: remove it")
        )
        assert ledger.count() == 1
