"""Durations written the way Go's ``time.Duration.String`` writes them (``1.5s``, ``2m0s``), because
kube-scheduler's messages embed them."""

from __future__ import annotations


def go_duration(seconds: float) -> str:
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        for unit, scale in (("ms", 1e3), ("µs", 1e6), ("ns", 1e9)):
            value = seconds * scale
            if value >= 1 or unit == "ns":
                return f"{sign}{_trim(value)}{unit}"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = sign
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    return out + f"{_trim(secs)}s"


def _trim(value: float) -> str:
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"
