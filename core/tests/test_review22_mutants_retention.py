"""Retention durations at their edges (twenty-second review, mutation testing of
``ledger/retention.py``).

The module's documentation fixes three things no test pinned down:

* a fraction of a week, a day, an hour or a minute is an exact length rounded to the
  microsecond: the tests used halves and tenths, whose microseconds stay the same when a unit is
  a microsecond longer or shorter (``0.5 * 3_600_000_001`` still rounds to ``1_800_000_000``);
* a window may reach back to year 1 and no further: the one reaching into year 1 was never
  tried, nor the one reaching exactly to year 0 (which broke with Python's ``ValueError`` when
  the bound moved, not the ``LedgerError`` naming the duration);
* an error names a duration whole up to 40 characters and cut short past it, never longer;
* in a spec string, the spaces around a pattern and its duration do not count, also when the
  duration continues past a comma decimal sign; a part continues only the duration just before
  it, and only while that one ends in a digit; a window's duration is everything after its
  first ``=``; a spec with no window configures no retention (``None``: a sweep without
  ``before`` is refused, SPEC 4.2 ``memory.sweep``), not an empty policy that sweeps nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_custody_state import LedgerError, RetentionPolicy
from agent_custody_state.ledger.retention import parse_duration

NOW = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("P0.9W", timedelta(days=6, hours=7, minutes=12)),
        ("P0.9D", timedelta(hours=21, minutes=36)),
        ("PT0.9H", timedelta(minutes=54)),
        ("PT0.9M", timedelta(seconds=54)),
        ("PT0.999999999H", timedelta(microseconds=3_599_999_996)),  # 3_599_999_996.4 µs
    ],
)
def test_a_fraction_of_a_unit_is_its_exact_length_to_the_microsecond(
    text: str, delta: timedelta
) -> None:
    """A week is 604,800 s, a day 86,400 s, an hour 3,600 s, a minute 60 s, exactly."""
    assert parse_duration(text).before(NOW) == NOW - delta


def test_a_window_may_reach_back_to_year_1_and_no_further() -> None:
    """The cutoff is checked from today when the window is parsed: reaching into year 1 is a
    cutoff; reaching into year 0 is refused as too long, as any longer window is."""
    now = datetime.now(UTC)
    year = now.year
    cutoff = parse_duration(f"P{year - 1}Y").before(now)
    assert (cutoff.year, cutoff.month, cutoff.time()) == (1, now.month, now.time())
    with pytest.raises(LedgerError, match=rf"retention duration P{year}Y reaches before year 1"):
        parse_duration(f"P{year}Y")


def test_an_error_names_a_duration_whole_up_to_40_characters_and_cut_short_past_them() -> None:
    fits = "PT" + "1" * 37 + "X"  # 40 characters, not a duration
    with pytest.raises(LedgerError) as caught:
        parse_duration(fits)
    assert f"{fits!r}" in str(caught.value)
    longer = fits + "1"  # 41 characters
    with pytest.raises(LedgerError) as caught:
        parse_duration(longer)
    assert f"{longer[:37] + '...'!r}" in str(caught.value)
    assert longer[:38] not in str(caught.value)


def test_spaces_around_a_window_do_not_count_when_its_duration_has_a_comma_decimal_sign() -> None:
    policy = RetentionPolicy.parse(" org = PT0,5S , team:* = P1D")
    assert policy is not None
    assert policy.as_dict() == {"org": "PT0,5S", "team:*": "P1D"}
    assert policy.cutoff_for("org", NOW) == NOW - timedelta(seconds=0.5)


def test_a_part_after_a_continued_duration_is_a_window_of_its_own() -> None:
    """``5S`` continues ``org=PT0`` (which ends in a digit); ``1`` follows ``5S``, which does
    not, so it is a window without a pattern, refused by name."""
    with pytest.raises(LedgerError, match=r"invalid retention window '1': expected pattern="):
        RetentionPolicy.parse("org=PT0,5S,1")


def test_a_window_with_two_equals_signs_is_refused_naming_its_duration() -> None:
    with pytest.raises(LedgerError, match=r"invalid retention duration 'P1D=P2D'"):
        RetentionPolicy.parse("org=P1D=P2D")


@pytest.mark.parametrize("spec", [None, "", " , ", {}])
def test_a_spec_with_no_window_configures_no_retention(spec: str | dict[str, str] | None) -> None:
    assert RetentionPolicy.parse(spec) is None


def test_a_prefix_pattern_needs_everything_before_its_star() -> None:
    policy = RetentionPolicy.parse("team:ab*=P1D")
    assert policy is not None
    assert policy.window_for("team:abc") is not None
    assert policy.window_for("team:ac") is None and policy.cutoff_for("team:a", NOW) is None
