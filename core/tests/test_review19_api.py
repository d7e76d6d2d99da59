"""The Python library under a user's misuse (nineteenth review): copies and pickles of a
``Ledger``, a caller's ``str``/``int``/``float`` subclasses (``enum`` members), an event's
``extra`` that JSON cannot keep, reads given a key of another type, and a batch generator
that fails half-way (docs/decisions.md, "Arguments a user gets wrong")."""

from __future__ import annotations

import copy
import enum
import json
import pickle
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError

BASE: dict[str, Any] = {"subject": "s", "predicate": "p", "value": 1, "space": "sp", "actor": "a"}


class Color(str, enum.Enum):  # noqa: UP042 - the mixin formats as "Color.RED": the case at issue
    RED = "red"


class Seats(enum.IntEnum):
    TWO = 2


class Half(float):
    pass


@pytest.fixture(params=["memory", "jsonl"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    where = "memory:" if request.param == "memory" else str(tmp_path / "l.jsonl")
    with Ledger(where) as opened:
        yield opened


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps])
def test_a_ledger_is_not_copied_or_pickled(tmp_path: Path, how: Any) -> None:
    """``copy.copy`` made a twin sharing the original's backend and life (closing the twin
    closed the original half-way); pickling failed on a lock, naming none of ours."""
    path = tmp_path / "l.jsonl"
    with Ledger(str(path)) as ledger:
        ledger.assert_fact(**BASE)
        with pytest.raises(TypeError, match="cannot be copied or pickled.*open another"):
            how(ledger)
        assert ledger.assert_fact(**BASE).fact.subject == "s"  # the original is untouched
        assert ledger.count() == 2


def test_enum_members_are_kept_as_plain_values(ledger: Ledger) -> None:
    """A ``str``/``int``/``float`` subclass is kept as the plain value JSON reads back, in
    texts and in values, as every other process reads it."""
    event = ledger.assert_fact(
        subject=Color.RED,
        predicate="p",
        value={"color": Color.RED, "seats": Seats.TWO, "share": Half(0.5), Color.RED: [Color.RED]},
        space="sp",
        actor=Color.RED,
        receipt_id=Color.RED,
        external={Color.RED: Color.RED},
        fact_extra={Color.RED: Color.RED},
    )
    for fact in (event.fact, ledger.get(event.fact_id)):
        assert fact is not None
        assert type(fact.subject) is str and f"{fact.subject}" == "red"
        assert type(fact.actor) is str and type(fact.source.receipt_id) is str
        assert fact.value == {"color": "red", "seats": 2, "share": 0.5, "red": ["red"]}
        kinds = [type(v) for v in fact.value.values()] + [type(k) for k in fact.value]
        assert kinds == [str, int, float, list, str, str, str, str]
        assert type(fact.value["red"][0]) is str
        assert fact.external == {"red": "red"}
        assert all(type(k) is str and type(v) is str for k, v in fact.external.items())
        assert [type(k) for k in fact.extra if k == "red"] == [str]
        assert type(fact.extra["red"]) is str
    [found] = ledger.as_of(subject="red")
    assert f"{found.subject}" == "red"


def test_enum_texts_on_every_mutation_are_plain(ledger: Ledger) -> None:
    fact_id = ledger.assert_fact(**BASE).fact_id
    events: list[Any] = [
        ledger.hold(fact_id=fact_id, actor=Color.RED, reason=Color.RED, receipt_id=Color.RED),
        ledger.release(fact_id=fact_id, actor=Color.RED, reason=Color.RED),
        ledger.confirm(fact_id=fact_id, actor=Color.RED),
        ledger.forget(fact_id=fact_id, actor=Color.RED, reason=Color.RED),
    ]
    for event in events + ledger.history(fact_id)[1:]:
        wire = event.to_dict()
        assert type(wire["actor"]) is str and f"{wire['actor']}" == "red"
        assert all(type(wire[k]) is str for k in ("factId", "reason") if k in wire)
    assert type(events[0].source.receipt_id) is str


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"n": float("nan")}, r"extra\.n: NaN is not JSON"),
        ({"big": 2**70}, r"extra\.big: .* outside the integers JSON keeps exactly"),
        ({"raw": b"x"}, r"extra\.raw must be JSON: extra\.raw is a bytes"),
        ({"s": {1, 2}}, r"extra\.s must be JSON"),
        ({1: "x"}, r"extra keys must be text, not int"),
        ([["k", "v"]], r"extra must be a mapping, not a list"),
    ],
)
@pytest.mark.parametrize("action", ["retract", "forget"])
def test_an_extra_json_cannot_keep_is_refused_before_anything_is_written(
    ledger: Ledger, extra: Any, message: str, action: str
) -> None:
    """NaN was written as null and 2^70 rounded (the event in hand said otherwise); bytes or a
    set failed as a bare TypeError from the encoder, naming no argument."""
    fact_id = ledger.assert_fact(**BASE).fact_id
    with pytest.raises(LedgerError, match=message) as caught:
        getattr(ledger, action)(fact_id=fact_id, actor="a", reason="r", extra=extra)
    assert str(caught.value.field).startswith("extra")
    assert ledger.count() == 1 and ledger.status(fact_id) == ("current", False)


def test_an_extra_is_kept_as_read_back(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with Ledger(str(path)) as ledger:
        fact_id = ledger.assert_fact(**BASE).fact_id
        event = ledger.retract(
            fact_id=fact_id, actor="a", reason="r", extra={"k": Color.RED, "f": 1.0}
        )
        assert event.extra["k"] == "red" and type(event.extra["k"]) is str
        assert event.extra["f"] == 1 and type(event.extra["f"]) is int
    line = json.loads(path.read_text().splitlines()[-1])
    assert (line["k"], line["f"]) == ("red", 1)


@pytest.mark.parametrize(
    ("read", "field"),
    [
        (lambda ledger: ledger.get(5), "fact_id"),
        (lambda ledger: ledger.get(None), "fact_id"),
        (lambda ledger: ledger.history(b"id"), "fact_id"),
        (lambda ledger: ledger.held(5), "fact_id"),
        (lambda ledger: ledger.is_retracted(5), "fact_id"),
        (lambda ledger: ledger.status(5), "fact_id"),
        (lambda ledger: ledger.current_external(5), "fact_id"),
        (lambda ledger: ledger.timeline(5), "subject"),
        (lambda ledger: ledger.timeline("s", space=5), "space"),
        (lambda ledger: ledger.as_of(space=5), "space"),
        (lambda ledger: ledger.as_of(subject=b"s"), "subject"),
        (lambda ledger: ledger.as_of(predicate=["p"]), "predicate"),
    ],
)
def test_a_read_key_of_another_type_is_refused(ledger: Ledger, read: Any, field: str) -> None:
    """``get(5)`` answered None and ``as_of(space=1)`` nothing, as if the ledger were empty."""
    ledger.assert_fact(**BASE)
    with pytest.raises(LedgerError, match=f"{field} must be a string") as caught:
        read(ledger)
    assert caught.value.field == field


def test_a_read_key_no_fact_has_still_finds_nothing(ledger: Ledger) -> None:
    ledger.assert_fact(**BASE)
    assert ledger.get("") is None and ledger.get("x\x00") is None
    assert ledger.as_of(space="") == [] and ledger.history("nope") == []


def test_a_batch_generator_failing_half_way_raises_its_own_error(ledger: Ledger) -> None:
    """A ``TypeError`` raised by the caller's generator was reported as "items must be a list
    of facts, not generator"; nothing is written either way."""

    def items() -> Any:
        yield dict(BASE)
        raise TypeError("the caller's own mistake")

    with pytest.raises(TypeError, match="the caller's own mistake"):
        ledger.assert_many(items())
    assert ledger.count() == 0
    with pytest.raises(LedgerError, match="items must be a list of facts, not int"):
        ledger.assert_many(5)  # type: ignore[arg-type]


class Provenance(str, enum.Enum):  # noqa: UP042 - as Color
    ATTESTED = "attested"


def test_provenance_and_confidence_are_kept_plain(ledger: Ledger) -> None:
    """A ``str``-enum provenance and a ``float`` subclass confidence read back plain."""
    event = ledger.assert_fact(**BASE, provenance=Provenance.ATTESTED, confidence=Half(0.5))
    for fact in (event.fact, ledger.get(event.fact_id)):
        assert fact is not None
        assert type(fact.provenance) is str and f"{fact.provenance}" == "attested"
        assert type(fact.confidence) is float and fact.confidence == 0.5


@pytest.mark.parametrize("confidence", [Decimal("0.5"), Fraction(1, 2)])
def test_a_confidence_of_a_python_only_type_is_told_its_type(
    ledger: Ledger, confidence: Any
) -> None:
    """It was refused as "must be between 0 and 1" although it was."""
    with pytest.raises(LedgerError, match=r"as an int or float, not a (Decimal|Fraction)$"):
        ledger.assert_fact(**BASE, confidence=confidence)
    assert ledger.count() == 0


@pytest.mark.parametrize("confidence", ["0.5", True, 1.5, float("nan"), [0.5]])
def test_a_json_confidence_keeps_the_spec_text(ledger: Ledger, confidence: Any) -> None:
    """What the server passes through (SPEC 2.1's text, the original's tool error)."""
    with pytest.raises(LedgerError, match=r"^confidence must be between 0 and 1$"):
        ledger.assert_fact(**BASE, confidence=confidence)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ledger: ledger.key_values("bogus"), "key must be one of subject, predicate"),
        (lambda ledger: ledger.key_values("subject", 5), "prefix must be a string"),
        (lambda ledger: ledger.key_values("subject", "", "10"), "limit must be a whole number"),
        (lambda ledger: ledger.key_values("subject", "", -1), "limit must be a whole number"),
    ],
)
def test_key_values_names_a_wrong_argument(ledger: Ledger, call: Any, message: str) -> None:
    """A misspelt key was a ``KeyError`` from the backend's index, a number a ``TypeError``."""
    ledger.assert_fact(**BASE)
    with pytest.raises(LedgerError, match=message):
        call(ledger)
    assert ledger.key_values("subject", "s", 10) == ["s"]


SWEEP: dict[str, Any] = {"before": "9999-01-01T00:00:00Z", "actor": "a", "reason": "r"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extras": [["id", {}]]}, "extras must map fact ids to extra keys, not a list"),
        ({"extras": {5: {}}}, "extras must be a string"),
        ({"only": "some-fact-id"}, "only must be a collection of fact ids, not a str"),
        ({"only": 5}, "only must be a collection of fact ids, not a int"),
    ],
)
def test_a_sweep_refuses_wrong_extras_or_only_before_forgetting(
    ledger: Ledger, options: dict[str, Any], message: str
) -> None:
    fact_id = ledger.assert_fact(**BASE).fact_id
    with pytest.raises(LedgerError, match=message):
        ledger.sweep(**SWEEP, **options)
    assert ledger.status(fact_id) == ("current", False) and ledger.count() == 1


@pytest.mark.parametrize(
    ("events", "batch_size", "message"),
    [
        ("dicts", 10, r"event 1: a dict, not an Event .*event_from_dict"),
        ("events", 0, "batch_size must be a whole number from 1"),
        ("events", "5", "batch_size must be a whole number from 1"),
        ("text", 10, "events must be events, not a str"),
    ],
)
def test_import_events_names_a_wrong_argument(
    tmp_path: Path, events: str, batch_size: Any, message: str
) -> None:
    """Wire dicts failed as an ``AttributeError`` deep in the check, a batch size of 0 as
    ``range()``'s ``ValueError``; nothing is written."""
    with Ledger("memory:") as source:
        source.assert_fact(**BASE)
        exported = list(source.export())
    given: Any = {"dicts": [e.to_dict() for e in exported], "events": exported, "text": "x"}[events]
    with Ledger(str(tmp_path / "l.jsonl")) as target:
        with pytest.raises(LedgerError, match=message):
            target.import_events(given, batch_size=batch_size)
        assert target.count() == 0
        assert target.import_events(exported, batch_size=1) == 1


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


ODD_KEYS: list[tuple[dict[Any, Any], str]] = [
    ({1: 2, "x": 3, **BASE}, "int"),
    ({Unprintable(): 1, **BASE}, "Unprintable"),
]


@pytest.mark.parametrize(("item", "kind"), ODD_KEYS)
def test_a_batch_item_with_a_key_that_is_not_text_is_refused(
    ledger: Ledger, item: dict[Any, Any], kind: str
) -> None:
    """Sorting the unknown keys failed with ``TypeError`` ("'<' not supported"), and a key
    whose ``str`` raises raised its own error; both are named now, and nothing is written."""
    with pytest.raises(LedgerError, match=f"^item 0: argument names must be text, not {kind}$"):
        ledger.assert_many([item])
    assert ledger.count() == 0
