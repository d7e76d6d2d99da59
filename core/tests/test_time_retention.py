"""Time normalisation (SPEC 1.3) and retention specs (SPEC 2.8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_custody_state import LedgerError, RetentionPolicy
from agent_custody_state.ledger.retention import parse_duration
from agent_custody_state.timeutil import TimeFormatError, normalize_time, parse_time


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("2026-09-01T00:00:00Z", "2026-09-01T00:00:00.000Z"),
        ("2026-09-01T02:00:00+02:00", "2026-09-01T00:00:00.000Z"),
        ("2026-08-31T19:30:00.5-04:30", "2026-09-01T00:00:00.500Z"),
        ("2026-09-01t00:00:00.123456z", "2026-09-01T00:00:00.123Z"),
        (datetime(2026, 9, 1, 1, tzinfo=timezone(timedelta(hours=1))), "2026-09-01T00:00:00.000Z"),
        # Four-digit years below 1000 (strftime("%Y") drops the zeros on glibc).
        ("0274-12-27T06:37:33.058801+00:00", "0274-12-27T06:37:33.058Z"),
        ("0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00.000Z"),
    ],
)
def test_normalise(given: object, want: str) -> None:
    assert normalize_time(given) == want


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("2026-09-01T00:00:00", "no UTC offset"),
        ("2026-09-01", "not an RFC 3339 time"),
        ("2026-02-30T00:00:00Z", "not a valid time"),
        ("2026-09-01T00:00:00+25:00", "not a valid time"),
        (datetime(2026, 9, 1), "naive"),
        (12, "expected an RFC 3339 time string"),
        # Valid local times whose UTC instant falls outside years 1-9999: refused, not a crash.
        ("0001-01-01T00:00:00+01:00", "outside the years 0001-9999"),
        ("9999-12-31T23:59:59-01:00", "outside the years 0001-9999"),
    ],
)
def test_refused(given: object, message: str) -> None:
    with pytest.raises(TimeFormatError, match=message):
        normalize_time(given)


def test_instants_not_strings() -> None:
    # As strings "…+02:00" sorts after "…Z" although it is two hours earlier.
    assert normalize_time("2026-09-01T01:00:00+02:00") < normalize_time("2026-09-01T00:00:00Z")


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("P90D", timedelta(days=90)),
        ("P2W", timedelta(weeks=2)),
        ("PT12H", timedelta(hours=12)),
        ("PT30M", timedelta(minutes=30)),
        ("PT45S", timedelta(seconds=45)),
        ("P1DT2H3M4.5S", timedelta(days=1, hours=2, minutes=3, seconds=4.5)),
    ],
)
def test_durations(text: str, delta: timedelta) -> None:
    now = datetime(2026, 9, 1, tzinfo=UTC)
    assert parse_duration(text).before(now) == now - delta


def test_calendar_arithmetic() -> None:
    assert parse_duration("P1M").before(datetime(2026, 3, 31, tzinfo=UTC)) == datetime(
        2026, 2, 28, tzinfo=UTC
    )
    assert parse_duration("P1Y").before(datetime(2028, 2, 29, tzinfo=UTC)) == datetime(
        2027, 2, 28, tzinfo=UTC
    )
    assert parse_duration("P1Y6M").before(datetime(2026, 9, 1, tzinfo=UTC)) == datetime(
        2025, 3, 1, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "bad", ["P", "PT", "90D", "P1DT", "-P1D", "P1H", "", "P\u0669\u0660D", "PT\uff11H"]
)  # the last two: digits of other scripts (Arabic-Indic, fullwidth), which ISO 8601 is not
def test_bad_durations(bad: str) -> None:
    with pytest.raises(LedgerError, match="invalid retention duration"):
        parse_duration(bad)


def test_most_specific_wins() -> None:
    policy = RetentionPolicy.parse("*=P365D,team:*=P90D,team:support=P7D,team:sup*=P30D")
    assert policy is not None
    assert policy.window_for("team:support")[0] == "team:support"  # type: ignore[index]
    assert policy.window_for("team:supply")[0] == "team:sup*"  # type: ignore[index]
    assert policy.window_for("team:x")[0] == "team:*"  # type: ignore[index]
    assert policy.window_for("org")[0] == "*"  # type: ignore[index]
    only = RetentionPolicy.parse("org=P1D")
    assert only is not None and only.window_for("org:x") is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("org", "expected pattern=duration"),
        ("org=P1X", "invalid retention duration 'P1X'"),
        ("org=P1D,org=P2D", "given twice"),
        ("=P1D", "empty space pattern"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(LedgerError, match=message):
        RetentionPolicy.parse(spec)


@pytest.mark.parametrize(
    "spec", ["org=P99999999999D", "org=PT99999999999999999999S", "org=P10000Y", "team:*=P3000Y"]
)
def test_a_window_whose_cutoff_cannot_be_computed_is_refused_when_parsed(spec: str) -> None:
    with pytest.raises(LedgerError, match="reaches before year 1") as caught:
        RetentionPolicy.parse(spec)
    assert caught.value.field == "retention"


def test_serve_refuses_such_a_window_with_one_line_and_no_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    ledger = tmp_path / "ledger.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_custody_state",
            "serve",
            "--ledger",
            str(ledger),
            "--retention",
            "org=P99999999999D",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: retention: retention duration P99999999999D reaches before year 1"
    ]
    assert list(tmp_path.iterdir()) == []


@given(
    st.tuples(
        st.integers(0, 9999),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 999),
    )
)
def test_an_already_normal_time_is_checked_as_the_parser_checks_it(
    parts: tuple[int, ...],
) -> None:
    """The fast check of an already normal string accepts exactly what ``parse_time`` does."""
    y, mo, d, h, mi, s, ms = parts
    text = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{ms:03d}Z"
    try:
        parse_time(text)
    except TimeFormatError:
        with pytest.raises(TimeFormatError):
            normalize_time(text)
    else:
        assert normalize_time(text) == text


@pytest.mark.parametrize("digits", ["\u0662\u0660\u0662\u0666", "\uff12\uff10\uff12\uff16"])
def test_digits_of_other_scripts_are_refused(digits: str) -> None:
    """RFC 3339 digits are ASCII; others (which ``int`` reads) once passed as already normal."""
    with pytest.raises(TimeFormatError, match="is not an RFC 3339 time"):
        normalize_time(f"{digits}-01-01T00:00:00.000Z")
