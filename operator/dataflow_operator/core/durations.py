"""Durations, in milliseconds, parsed from the forms users write.

Accepted: compact units (``21d1h``, ``1h30m``, ``500ms``), words (``30 days``,
``1 hour 30 minutes``), ISO-8601 (``P21DT1H``, ``PT0.5S``), and a bare ``0``. Units are
``ms``, ``s``, ``m``, ``h``, ``d`` and ``w`` (and their English names). Negative or
malformed input, and a duration longer than :data:`MAX_DURATION` (one that would carry
a time past what timestamps can hold), raise
:class:`~dataflow_operator.core.errors.InvalidDuration` with a reason; callers add the
field path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from dataflow_operator.core.errors import InvalidDuration

__all__ = ["MAX_DURATION", "Duration", "parse_duration"]

_MS = 1
_SECOND = 1000
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
_WEEK = 7 * _DAY

_UNITS: dict[str, int] = {
    "ms": _MS, "msec": _MS, "millisecond": _MS, "milliseconds": _MS,
    "s": _SECOND, "sec": _SECOND, "secs": _SECOND, "second": _SECOND, "seconds": _SECOND,
    "m": _MINUTE, "min": _MINUTE, "mins": _MINUTE, "minute": _MINUTE, "minutes": _MINUTE,
    "h": _HOUR, "hr": _HOUR, "hrs": _HOUR, "hour": _HOUR, "hours": _HOUR,
    "d": _DAY, "day": _DAY, "days": _DAY,
    "w": _WEEK, "week": _WEEK, "weeks": _WEEK,
}  # fmt: skip

_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*,?", re.IGNORECASE)
_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
_ISO_UNITS = {"w": _WEEK, "d": _DAY, "h": _HOUR, "m": _MINUTE, "s": _SECOND}
MAX_DURATION = 36500 * _DAY
"""The longest duration accepted (36500d, about 100 years): the start time plus it stays a
time that can be written down (years up to 9999)."""
_FORMAT_UNITS = (("d", _DAY), ("h", _HOUR), ("m", _MINUTE), ("s", _SECOND), ("ms", _MS))


@total_ordering
@dataclass(frozen=True, slots=True)
class Duration:
    """A non-negative span of time in milliseconds."""

    millis: int

    def __post_init__(self) -> None:
        if self.millis < 0:
            raise InvalidDuration(f"duration must not be negative, got {self.millis}ms")

    @property
    def is_zero(self) -> bool:
        """True for the zero duration (which disables expiration)."""
        return self.millis == 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Duration):
            return NotImplemented
        return self.millis < other.millis

    def __str__(self) -> str:
        """The canonical compact form, e.g. ``21d1h`` or ``0``."""
        if self.millis == 0:
            return "0"
        rest, parts = self.millis, []
        for unit, size in _FORMAT_UNITS:
            count, rest = divmod(rest, size)
            if count:
                parts.append(f"{count}{unit}")
        return "".join(parts)


def _to_millis(amount: str, unit_size: int, text: str) -> int:
    value = float(amount) * unit_size if "." in amount else int(amount) * unit_size
    if isinstance(value, float) and not value.is_integer():
        raise InvalidDuration(f"{text!r} is not a whole number of milliseconds")
    return int(value)


def parse_duration(text: str | int) -> Duration:
    """Parse a duration; see the module docstring for the accepted forms.

    An integer is accepted only when it is ``0`` (YAML reads ``0`` as a number); any other
    number is ambiguous and rejected with a hint to add a unit.
    """
    if isinstance(text, bool):
        raise InvalidDuration(f"expected a duration such as '21d' or '1h30m', got {text!r}")
    if isinstance(text, int):
        if text == 0:
            return Duration(0)
        if text < 0:
            raise InvalidDuration(f"duration must not be negative, got {text}")
        raise InvalidDuration(f"duration {text} has no unit; write e.g. '{text}s' or '{text}d'")
    stripped = text.strip()
    if not stripped:
        raise InvalidDuration("duration is empty; write e.g. '21d' or '1h30m'")
    if stripped.startswith("-"):
        raise InvalidDuration(f"duration must not be negative, got {text!r}")
    if stripped == "0":
        return Duration(0)
    if stripped[0] in "pP":
        return _parse_iso(stripped, text)
    total, position = 0, 0
    seen: set[int] = set()
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if match is None or match.end() == position:
            raise InvalidDuration(
                f"cannot parse duration {text!r}; expected e.g. '21d1h', '30 days', "
                "'500ms' or ISO-8601 'P21DT1H'"
            )
        amount, unit = match.group(1), match.group(2).lower()
        if unit not in _UNITS:
            raise InvalidDuration(
                f"unknown unit {match.group(2)!r} in duration {text!r}; use ms, s, m, h, d or w"
            )
        size = _UNITS[unit]
        if size in seen:
            raise InvalidDuration(f"unit {match.group(2)!r} appears twice in duration {text!r}")
        seen.add(size)
        total += _to_millis(amount, size, text)
        position = match.end()
    return _bounded(total, text)


def _bounded(total: int, text: str) -> Duration:
    if total > MAX_DURATION:
        raise InvalidDuration(
            f"duration {text!r} is longer than {MAX_DURATION // _DAY}d (about 100 years), "
            "the longest accepted"
        )
    return Duration(total)


def _parse_iso(stripped: str, text: str) -> Duration:
    match = _ISO.match(stripped)
    if match is None or stripped.upper() in {"P", "PT"} or stripped.upper().endswith("T"):
        raise InvalidDuration(
            f"cannot parse ISO-8601 duration {text!r}; expected e.g. 'P21DT1H' "
            "(years and months are not fixed lengths and are not accepted)"
        )
    total = 0
    for group, size in _ISO_UNITS.items():
        amount = match.group(group)
        if amount is not None:
            total += _to_millis(amount, size, text)
    return _bounded(total, text)
