"""Time on the wire: RFC 3339 in, ``YYYY-MM-DDTHH:MM:SS.mmmZ`` out.

Every caller-supplied time is parsed with its offset, converted to UTC and truncated to
milliseconds, so two spellings of one instant compare equal. Normalised strings have a fixed
width, so comparing two of them as strings is comparing the instants (years 0000-9999).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]

# ASCII digits only: ``\d`` alone also matches other scripts' digits, which ``int`` reads, so a
# time spelled in Arabic-Indic digits passed as already normal and was stored as it came.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$",
    re.ASCII,
)
#: A time in the normal form every stored time takes, its fields in range (whether the day
#: exists in its month, and year 0, are told by ``_real_day``, once per date).
NORMAL_TIME = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z",
    re.ASCII,
)
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class TimeFormatError(ValueError):
    """A time that is not RFC 3339 with an offset (the caller maps it to a field name)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """Format an aware datetime as the wire form (UTC, milliseconds, ``Z``)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TimeFormatError("a naive datetime has no offset; pass an aware datetime")
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:
        raise TimeFormatError(
            f"{moment.isoformat()} is outside the years 0001-9999 in UTC"
        ) from None
    # Not strftime("%Y"): glibc writes year 274 as "274", breaking the fixed width that lets
    # normalised times compare as strings (and the wire format).
    m = moment
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:"
        f"{m.second:02d}.{m.microsecond // 1000:03d}Z"
    )


def parse_time(value: object) -> datetime:
    """Parse an aware ``datetime`` or an RFC 3339 string with an offset into an aware UTC datetime."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise TimeFormatError("a naive datetime has no offset; pass an aware datetime")
        try:
            return value.astimezone(UTC)
        except OverflowError:  # e.g. year 1 at +01:00: its UTC instant is in year 0
            raise TimeFormatError(
                f"{value.isoformat()} is outside the years 0001-9999 in UTC"
            ) from None
    if not isinstance(value, str):
        raise TimeFormatError(f"expected an RFC 3339 time string, got {type(value).__name__}")
    match = _RFC3339.fullmatch(value)
    if not match:
        if re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$", value):
            raise TimeFormatError(f"{value!r} has no UTC offset; add Z or +hh:mm")
        raise TimeFormatError(f"{value!r} is not an RFC 3339 time such as 2026-09-01T00:00:00Z")
    year, month, day, hour, minute, second, frac, offset = match.groups()
    millis = int((frac or "0")[:3].ljust(3, "0"))
    try:
        if offset in ("Z", "z"):
            tz = UTC
        else:
            sign = 1 if offset[0] == "+" else -1
            hours, minutes = int(offset[1:3]), int(offset[4:6])
            if hours > 23 or minutes > 59:
                raise ValueError("offset out of range")
            from datetime import timezone

            tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            millis * 1000,
            tzinfo=tz,
        )
    except ValueError as exc:
        raise TimeFormatError(f"{value!r} is not a valid time: {exc}") from None
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        # e.g. 0001-01-01T00:00:00+01:00: a valid local time whose UTC instant is in year 0.
        raise TimeFormatError(f"{value!r} is outside the years 0001-9999 in UTC") from None


@functools.lru_cache(maxsize=1 << 12)
def _real_day(date: str) -> bool:
    """Whether the date of a normal-form time exists (not 2026-02-30, not year 0): what
    ``parse_time`` accepts, told once per date (a ledger's times fall on few days)."""
    year, month, day = int(date[0:4]), int(date[5:7]), int(date[8:10])
    if year < 1 or not 1 <= month <= 12 or not 1 <= day <= _MONTH_DAYS[month - 1]:
        return False
    return not (
        month == 2 and day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0))
    )


def normalize_time(value: object) -> str:
    """Parse and re-format: the one form every stored and compared time takes."""
    if isinstance(value, str) and NORMAL_TIME.fullmatch(value):
        if _real_day(value[:10]):
            return value
        parse_time(value)  # an impossible date such as 2026-02-30: the parser's own error
    return format_time(parse_time(value))


def wire_time_key(value: str) -> str:
    """Comparison key for a time read back from storage (already normal unless hand-written).
    A normal time is its own key (one match, no cache: a read of a large ledger keys times it
    has not seen, and a cache miss costs more than the match); any other is keyed once and
    cached."""
    if NORMAL_TIME.fullmatch(value):
        return value
    return _other_time_key(value)


@functools.lru_cache(maxsize=1 << 12)
def _other_time_key(value: str) -> str:
    try:
        return format_time(parse_time(value))
    except TimeFormatError:
        return value
