"""Retention windows: ``pattern=duration`` specs, full ISO 8601 durations, most specific wins.

``org=P365D,team:*=P90D,user:*=P30D``: a pattern ending in ``*`` matches by prefix (``*`` alone
matches every space), any other pattern exactly. For a space, an exact pattern wins over any
prefix, and a longer prefix over a shorter one, whatever order they were written in. Years and
months are calendar arithmetic (``P1M`` before 31 March is the last day of February).

As ISO 8601 allows, the last part given may have a decimal fraction, written with a dot or a
comma (``PT1.5H``, ``P0,5D``, ``PT0,5S``), rounded to the microsecond: weeks, days, hours and
minutes are exact lengths (a day is 24 hours). A fraction of a year or a month is refused: the
length of either depends on where it falls in the calendar, so half of one has no single
meaning. In a spec string, where commas separate windows, ``org=PT0,5S`` keeps its comma: a
part with no ``=`` that follows a duration ending in a digit continues it (both pieces alone
are invalid, so no spec that parsed before reads differently).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from agent_custody_state.ledger.errors import LedgerError

#: One part's number: digits, and a fraction after a dot or a comma (ISO 8601's decimal signs).
_N = r"(\d+(?:[.,]\d+)?)"
_DURATION = re.compile(
    rf"^P(?!$)(?:{_N}Y)?(?:{_N}M)?(?:{_N}W)?(?:{_N}D)?"
    rf"(?:T(?=\d)(?:{_N}H)?(?:{_N}M)?(?:{_N}S)?)?$",
    re.ASCII,  # ISO 8601 digits only: ``\d`` would take any script's (``P٩٠D``)
)

#: Microseconds in a week, a day, an hour and a minute (the exact units a fraction may end).
_MICROSECONDS = (604_800_000_000, 86_400_000_000, 3_600_000_000, 60_000_000)


#: More digits than this in one part of a duration reach before year 1 whatever the unit
#: (10**19 seconds is 3 * 10**11 years).
_MAX_DIGITS = 19


def _number(digits: str | None) -> int:
    """One part's count (ASCII digits, at most ``_MAX_DIGITS`` of them past leading zeros)."""
    return int(digits.lstrip("0") or "0") if digits else 0


def _whole(part: str | None) -> str | None:
    """A part's digits before its decimal sign."""
    return re.split("[.,]", part)[0] if part else None


#: Fraction digits read past the decimal sign of a week, day, hour or minute: the rest are worth
#: less than 10**-18 µs (and a million digits took half a minute to multiply out).
_FRACTION_DIGITS = 30


def _fraction_of(part: str, unit: int) -> int:
    """The microseconds of ``part``'s fraction (after its decimal sign) in unit ``unit`` (an
    index into ``_MICROSECONDS``), rounded half to even as ``timedelta`` rounds seconds."""
    digits = re.split("[.,]", part)[1][:_FRACTION_DIGITS]
    return round(Fraction(int(digits), 10 ** len(digits)) * _MICROSECONDS[unit - 2])


def _shown(text: str) -> str:
    """A duration as an error names it: a very long one cut short."""
    return text if len(text) <= 40 else f"{text[:37]}..."


@dataclass(frozen=True, slots=True)
class Duration:
    """An ISO 8601 duration split into calendar (years, months) and exact parts."""

    text: str
    years: int = 0
    months: int = 0
    delta: timedelta = timedelta(0)

    def before(self, moment: datetime) -> datetime:
        """``moment - self`` with calendar arithmetic for years and months."""
        total_months = moment.year * 12 + (moment.month - 1) - (self.years * 12 + self.months)
        year, month = divmod(total_months, 12)
        month += 1
        too_long = LedgerError(
            f"retention duration {self.text} reaches before year 1", field="retention"
        )
        if year < 1:
            raise too_long
        day = min(moment.day, calendar.monthrange(year, month)[1])
        try:
            return moment.replace(year=year, month=month, day=day) - self.delta
        except OverflowError:
            raise too_long from None


def parse_duration(text: str) -> Duration:
    match = _DURATION.fullmatch(text.strip())
    if not match or text.strip().endswith("T"):
        raise LedgerError(
            f"invalid retention duration {_shown(text)!r}: use ISO 8601 such as P365D, P6M, "
            "P1Y, P2W, PT12H or P1Y2M10DT2H30M",
            field="retention",
        )
    parts = match.groups()
    given = [i for i, part in enumerate(parts) if part]
    fractions = [i for i, part in enumerate(parts) if part and not part.isdigit()]
    if fractions and fractions != given[-1:]:
        raise LedgerError(
            f"invalid retention duration {_shown(text.strip())!r}: only its last part may have "
            "a fraction (ISO 8601), e.g. PT1.5H or PT1H30M",
            field="retention",
        )
    if fractions and fractions[0] < 2:
        raise LedgerError(
            f"invalid retention duration {_shown(text.strip())!r}: a fraction of a year or a "
            "month has no fixed length (months differ); give whole months or a shorter unit, "
            "e.g. P18M or P45D",
            field="retention",
        )
    if any(len((_whole(part) or "").lstrip("0")) > _MAX_DIGITS for part in parts):
        # Longer than any window with a cutoff (and than ``int`` reads: 4300 digits raised a
        # ValueError, not this error): refused as too long, the text shortened in the message.
        raise LedgerError(
            f"retention duration {_shown(text.strip())} reaches before year 1", field="retention"
        )
    y, mo, w, d, h, mi = (_number(_whole(part)) for part in parts[:6])
    seconds = (parts[6] or "0").replace(",", ".")
    try:
        # Seconds as they always were (a float, rounded to the microsecond by ``timedelta``).
        delta = timedelta(weeks=w, days=d, hours=h, minutes=mi, seconds=float(seconds))
        if fractions and fractions[0] < 6:  # weeks to minutes: exact, to the microsecond
            delta += timedelta(microseconds=_fraction_of(parts[fractions[0]] or "", fractions[0]))
    except OverflowError:
        delta = timedelta.max  # caught just below, with the same message as any too-long one
    duration = Duration(text.strip(), y, mo, delta)
    # A window whose cutoff cannot be computed would start the server and break every sweep:
    # refuse it now. Checked from today (cutoffs only move later as time passes).
    duration.before(datetime.now(UTC))
    return duration


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Parsed retention windows; ``window_for(space)`` picks the most specific pattern."""

    windows: tuple[tuple[str, Duration], ...]

    @classmethod
    def parse(cls, spec: str | Mapping[str, str] | None) -> RetentionPolicy | None:
        if spec is None:
            return None
        if isinstance(spec, Mapping):
            pairs = list(spec.items())
        elif not isinstance(spec, str):
            raise LedgerError(
                "retention must be a spec such as 'org=P365D,team:*=P90D' or a mapping of "
                f"space patterns to durations, not a {type(spec).__name__}",
                field="retention",
            )
        else:
            pairs = []
            previous = ""  # the part before, as written
            for part in spec.split(","):
                if "=" not in part and previous[-1:].isdigit() and part[:1].isdigit():
                    # ``org=PT0,5S``: the comma was the duration's decimal sign (module doc).
                    pattern, duration = pairs[-1]
                    pairs[-1] = (pattern, f"{duration},{part.strip()}")
                    previous = part
                    continue
                previous = part
                if not part.strip():
                    continue
                if "=" not in part:
                    raise LedgerError(
                        f"invalid retention window {part.strip()!r}: expected pattern=duration, "
                        "e.g. team:*=P90D",
                        field="retention",
                    )
                pattern, duration = part.split("=", 1)
                pairs.append((pattern.strip(), duration.strip()))
        if not pairs:
            return None
        seen: set[str] = set()
        windows = []
        for pattern, duration in pairs:
            if not isinstance(pattern, str) or not isinstance(duration, str):
                raise LedgerError(
                    f"retention window {pattern!r}: the pattern and its duration must be text "
                    f"such as 'team:*' and 'P90D', got {duration!r}",
                    field="retention",
                )
            if not pattern:
                raise LedgerError(
                    "a retention window has an empty space pattern", field="retention"
                )
            if pattern in seen:
                raise LedgerError(
                    f"retention pattern {pattern!r} is given twice", field="retention"
                )
            seen.add(pattern)
            windows.append((pattern, parse_duration(duration)))
        return cls(tuple(windows))

    def as_dict(self) -> dict[str, str]:
        return {pattern: duration.text for pattern, duration in self.windows}

    def window_for(self, space: str) -> tuple[str, Duration] | None:
        best: tuple[int, str, Duration] | None = None
        for pattern, duration in self.windows:
            if pattern.endswith("*"):
                prefix = pattern[:-1]
                if not space.startswith(prefix):
                    continue
                rank = len(prefix)
            elif pattern == space:
                rank = 1 << 30  # exact beats any prefix
            else:
                continue
            if best is None or rank > best[0]:
                best = (rank, pattern, duration)
        return (best[1], best[2]) if best else None

    def cutoff_for(self, space: str, now: datetime) -> datetime | None:
        window = self.window_for(space)
        return window[1].before(now) if window else None
