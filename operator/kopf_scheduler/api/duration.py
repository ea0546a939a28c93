"""Durations written as Go's ``time.ParseDuration`` reads them (``5s``, ``1m30s``, ``250ms``), the format of
``metav1.Duration`` fields such as an extender's ``httpTimeout``."""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # micro sign
    "\u03bcs": 1e-6,  # Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d*)(?:\.(\d*))?([^\d.]*)")


class DurationError(ValueError):
    """Not a Go duration; the message is Go's (``time: invalid duration "x"``)."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``: an optional sign, then one or more ``<decimal><unit>`` parts; ``0`` alone needs
    no unit."""
    quoted = '"' + text + '"'
    rest = text
    sign = 1.0
    if rest[:1] in ("-", "+"):
        sign = -1.0 if rest[0] == "-" else 1.0
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise DurationError(f"time: invalid duration {quoted}")
    total = 0.0
    while rest:
        match = _PART.match(rest)
        assert match is not None  # the pattern matches the empty string
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            raise DurationError(f"time: invalid duration {quoted}")
        if not unit:
            raise DurationError(f"time: missing unit in duration {quoted}")
        if unit not in _UNITS:
            raise DurationError(f'time: unknown unit "{unit}" in duration {quoted}')
        value = float(f"{whole or 0}.{fraction or 0}")
        total += value * _UNITS[unit]
        rest = rest[match.end() :]
    return sign * total
