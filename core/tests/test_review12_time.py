"""Twelfth review, time: the retention duration grammar's decimal fractions (ISO 8601: a comma
or a dot, on the last part given) and a ledger's present under threads after a clock step
(docs/decisions.md, "Sweeps at the edges of time" and "Time never runs backwards")."""

from __future__ import annotations

import linecache
import re
import sys
import threading
import traceback
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

import pytest

from agent_custody_state import Ledger, LedgerError, RetentionPolicy
from agent_custody_state.ledger.retention import parse_duration
from agent_custody_state_conformance.threads import SpyLock

NOW = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("PT0,5S", timedelta(seconds=0.5)),  # ISO 8601's comma decimal sign
        ("PT1.5H", timedelta(hours=1, minutes=30)),
        ("PT1,5H", timedelta(hours=1, minutes=30)),
        ("P0.5D", timedelta(hours=12)),
        ("P0.5W", timedelta(days=3, hours=12)),
        ("PT0.1M", timedelta(seconds=6)),
        ("P1W2,25D", timedelta(days=9, hours=6)),
        ("P1DT2H3M4,5S", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
        ("P1DT0.000000001H", timedelta(days=1, microseconds=4)),  # 3.6 µs, to the microsecond
        ("PT1." + "3" * 6000 + "H", timedelta(hours=1, minutes=20)),  # past int's 4300 digits
    ],
)
def test_a_fraction_on_the_last_part_with_a_dot_or_a_comma(text: str, delta: timedelta) -> None:
    """The grammar took a fraction on seconds only, and only after a dot."""
    assert parse_duration(text).before(NOW) == NOW - delta


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("PT0.5S", timedelta(seconds=0.5)),
        ("P1DT2H3M4.5S", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
        ("PT0.0000005S", timedelta(0)),  # rounded as ``timedelta`` always rounded seconds
        ("P1Y2M10DT2H30M", timedelta(days=10, hours=2, minutes=30)),
    ],
)
def test_what_parsed_before_means_what_it_meant(text: str, delta: timedelta) -> None:
    duration = parse_duration(text)
    assert duration.delta == delta


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("P1.5Y", "a fraction of a year or a month has no fixed length"),
        ("P1,5M", "a fraction of a year or a month has no fixed length"),
        ("P0.5YT1H", "only its last part may have a fraction"),
        ("PT1.5H30M", "only its last part may have a fraction"),
        ("P0.5DT1H", "only its last part may have a fraction"),
        ("P1" + "0" * 19 + ".5D", "reaches before year 1"),  # the bounds still hold
        ("P99999999999999.5D", "reaches before year 1"),
    ],
)
def test_a_fraction_the_grammar_cannot_take_is_refused_naming_why(text: str, message: str) -> None:
    with pytest.raises(LedgerError, match=message):
        parse_duration(text)


@pytest.mark.parametrize("bad", ["PT.5S", "PT1.S", "PT1,,5S", "PT1.5.5S", "P1.5", "PT0,5"])
def test_a_malformed_fraction_is_still_refused(bad: str) -> None:
    with pytest.raises(LedgerError, match="invalid retention duration"):
        parse_duration(bad)


def test_a_spec_string_keeps_a_comma_decimal_sign() -> None:
    """Commas separate a spec string's windows: ``org=PT0,5S`` was refused as a window ``5S``
    with no pattern. A part with no ``=`` after a duration ending in a digit continues it."""
    policy = RetentionPolicy.parse("org=PT0,5S,team:*=P0,5D,user:*=P30D")
    assert policy is not None
    assert policy.as_dict() == {"org": "PT0,5S", "team:*": "P0,5D", "user:*": "P30D"}
    assert policy.cutoff_for("team:x", NOW) == NOW - timedelta(hours=12)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("org=P1D,5S", "invalid retention window '5S'"),  # P1D is complete: no continuation
        ("org=PT0 ,5S", "invalid retention window '5S'"),
        ("org=PT0,,5S", "invalid retention window '5S'"),
        ("org=P1,5Y", "a fraction of a year or a month"),
    ],
)
def test_a_spec_string_continues_only_a_duration_cut_at_its_decimal_sign(
    spec: str, message: str
) -> None:
    with pytest.raises(LedgerError, match=message):
        RetentionPolicy.parse(spec)


#: The statement that stores a higher present: in ``Ledger._appended`` before the fix, in
#: ``HighWater.raise_to`` after it.
_STORE = re.compile(r"^\s*self\.(_present|time)\s*=")


def test_the_present_never_moves_back_under_two_threads_after_a_clock_step() -> None:
    """Two threads announced their appends in either order with a check-then-set: one that had
    checked its earlier stamp stored it after another had stored a later one, so after the clock
    stepped back ``present()`` went back too and the later write was not believed "now".

    Thread A is paused (a trace function) right where it stores its stamp; thread B then writes
    later, and the clock steps back before A goes on. A lock B waits for shows as ``waiting``
    (``SpyLock``); without one B finishes first."""
    clock = [datetime(2026, 9, 1, 10, tzinfo=UTC)]
    fact: dict[str, Any] = {"predicate": "p", "space": "o", "actor": "a"}
    with Ledger("memory:", clock=lambda: clock[0]) as ledger:
        ledger.assert_fact(subject="base", value=0, **fact)
        paused, go = threading.Event(), threading.Event()
        errors: list[str] = []
        stopped: list[str] = []  # the line A was paused at (none: the race was not run)
        high: Any = ledger._present  # the object ``present()`` reads
        lock = getattr(high, "_lock", None)
        spy = SpyLock(lock if lock is not None else threading.RLock())
        if lock is not None:
            high._lock = spy
        settled = spy.waiting  # B waits for the lock, or (below) has finished

        def tracer(frame: FrameType, event: str, arg: object) -> Any:
            if frame.f_code.co_name not in ("_appended", "raise_to"):
                return None

            def local(frame: FrameType, event: str, arg: object) -> Any:
                line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
                if event == "line" and _STORE.match(line) and not paused.is_set():
                    stopped.append(line)
                    paused.set()
                    assert go.wait(10)
                return local

            return local

        def run(name: str, traced: bool) -> None:
            if traced:
                sys.settrace(tracer)
            else:
                spy.watched = threading.get_ident()
            try:
                ledger.assert_fact(subject=name, value=1, **fact)
            except BaseException:
                errors.append(traceback.format_exc())
            finally:
                sys.settrace(None)
                paused.set()
                if not traced:
                    settled.set()

        clock[0] += timedelta(minutes=30)  # A is stamped 10:30
        a = threading.Thread(target=run, args=("a", True))
        a.start()
        assert paused.wait(10)
        clock[0] += timedelta(minutes=30)  # B is stamped 11:00
        b = threading.Thread(target=run, args=("b", False))
        b.start()
        assert settled.wait(10)
        clock[0] -= timedelta(hours=2)  # an NTP step back, to 09:00
        go.set()
        a.join(10)
        b.join(10)
        assert not errors, errors[0]
        assert stopped, "thread A never reached the statement storing the present"
        assert ledger.present() == "2026-09-01T11:00:00.000Z"
        assert {f.subject for f in ledger.as_of()} == {"base", "a", "b"}  # B's write is "now"
