"""Values are kept exactly or refused (I-JSON, RFC 7493), and times are parsed whole (issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError

REFUSED: list[tuple[Any, str]] = [
    (float("nan"), "value: NaN is not JSON"),
    (float("inf"), "value: Infinity is not JSON"),
    ({"seats": [3, float("-inf")]}, "value.seats[1]: -Infinity is not JSON"),
    (10**400, "value: an integer of about 401 digits is outside the integers JSON keeps"),
    (12345678901234567890123, "value: 12345678901234567890123 is outside the integers"),
    (2**53 + 1, "value: 9007199254740993 is outside"),
    ({"a b": {"c": [0, -(2**53)]}}, 'value["a b"].c[1]: -9007199254740992 is outside'),
    ([{"ok": 1}, {"bad": float("nan")}], "value[1].bad: NaN is not JSON"),
]


@pytest.mark.parametrize(("value", "message"), REFUSED)
def test_a_value_json_cannot_keep_is_refused_naming_its_place(
    tmp_path: Path, value: Any, message: str
) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        before = path.read_bytes()
        with pytest.raises(LedgerError) as caught:
            ledger.assert_fact(subject="s", predicate="q", value=value, space="o", actor="a")
        assert str(caught.value).startswith(message), caught.value
        assert caught.value.field == "value" and caught.value.code == "invalid_argument"
        with pytest.raises(LedgerError, match="item 1: value"):
            ledger.assert_many(
                [
                    {"subject": "s", "predicate": "x", "value": 1, "space": "o", "actor": "a"},
                    {"subject": "s", "predicate": "y", "value": value, "space": "o", "actor": "a"},
                ]
            )
    assert path.read_bytes() == before


def test_values_json_keeps_read_back_bit_for_bit_after_reopen(tmp_path: Path) -> None:
    value = {
        "max": 1e308,
        "tiny": 5e-324,
        "tenth": 0.1,
        "edge": 2**53 - 1,
        "neg": -(2**53 - 1),
        "third": 1 / 3,
        "big": 1.7976931348623157e308,
    }
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        fact_id = ledger.assert_fact(
            subject="s", predicate="p", value=value, space="o", actor="a"
        ).fact_id
    with Ledger(path) as ledger:
        back = ledger.get(fact_id)
    assert back is not None
    assert {
        k: (type(v), v.hex() if isinstance(v, float) else v) for k, v in back.value.items()
    } == {k: (type(v), v.hex() if isinstance(v, float) else v) for k, v in value.items()}


def test_a_fact_id_that_exists_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(path) as ledger:
        ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a", fact_id="f-1")
        before = path.read_bytes()
        with pytest.raises(LedgerError, match="^fact f-1 already exists$") as caught:
            ledger.assert_fact(
                subject="t", predicate="q", value=2, space="o", actor="a", fact_id="f-1"
            )
        assert caught.value.code == "fact_exists"
    assert path.read_bytes() == before


def test_only_a_fact_id_the_caller_gave_is_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fact id the ledger draws itself (a random version-4 UUID, as every event id) cannot
    be taken: a plain assert asks the backend nothing before it appends (on PostgreSQL one
    round trip of four), a supersession's walk leaves the new id out, a batch asks only for
    the ids its items gave. A given id is still looked up, and refused when taken."""
    asked: list[tuple[str, list[str]]] = []
    depth = [0]  # the ledger's own questions, not those a backend method asks itself
    with Ledger("memory:", chain=False) as ledger:
        backend: Any = ledger.backend
        for name in ("get_assert", "events_for", "events_along"):
            real = getattr(backend, name)

            def spy(arg: Any, _real: Any = real, _name: str = name) -> Any:
                if not depth[0]:
                    asked.append((_name, sorted([arg] if isinstance(arg, str) else arg)))
                depth[0] += 1
                try:
                    return _real(arg)
                finally:
                    depth[0] -= 1

            monkeypatch.setattr(backend, name, spy)
        fact = {"subject": "s", "predicate": "p", "space": "o", "actor": "a"}
        first = ledger.assert_fact(**fact, value=1)
        ledger.validate_assert(**{**fact, "subject": "t"}, value=1)
        ledger.assert_many([{**fact, "value": 2, "subject": "u"}])
        assert asked == []
        second = ledger.assert_fact(**fact, value=2, supersedes=first.fact_id)
        assert asked == [("events_along", [first.fact_id])]
        asked.clear()
        ledger.assert_fact(**{**fact, "subject": "v"}, value=3, fact_id="given-1")
        ledger.assert_many(
            [{**fact, "value": 4, "subject": "w"}, {**fact, "value": 0, "fact_id": "given-2"}]
        )
        ledger.assert_fact(**fact, value=5, supersedes=second.fact_id, fact_id="given-3")
        assert asked == [
            ("get_assert", ["given-1"]),
            ("events_for", ["given-2"]),
            ("events_along", [second.fact_id, "given-3"]),
        ]
        with pytest.raises(LedgerError, match="^item 0: fact given-1 already exists$"):
            ledger.assert_many([{**fact, "value": 6, "subject": "x", "fact_id": "given-1"}])


@pytest.mark.parametrize(
    "spelling",
    [
        "2026-01-01T00:00:00.000Z\n",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z ",
        "2026-01-01T00:00:00+01:00\n",
    ],
)
def test_a_time_with_surrounding_whitespace_is_refused(tmp_path: Path, spelling: str) -> None:
    with Ledger("memory:") as ledger:
        with pytest.raises(LedgerError, match="valid_from: .* is not an RFC 3339 time"):
            ledger.assert_fact(
                subject="s", predicate="p", value=1, space="o", actor="a", valid_from=spelling
            )
        with pytest.raises(LedgerError, match="tx_at"):
            ledger.as_of(tx_at=spelling)
