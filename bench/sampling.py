"""The numbers a run reports, computed the way upstream scheduler_perf computes them.

Throughput (``test/integration/scheduler_perf/util.go``, ``throughputCollector``): a ticker fires every
second and reads how many measured pods are scheduled so far (counted from pod watch events: a pod
counts once, the first time an event shows it with ``spec.nodeName``). Ticks before the first scheduled
pod are ignored; the first tick that sees one only starts the clock (it is likely an outlier, because
creating pods and sampling start independently); an interval in which nothing was scheduled is not
recorded as 0 pods/s but merged into the next interval that schedules something, whose rate is then
recorded once per merged interval. Collection stops as soon as every measured pod is scheduled, so the
last partial second is not a sample. The summary is the mean of the samples and the percentiles
``sorted[ceil(n * p / 100) - 1]``.

Latency percentiles use the same nearest-rank rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

SAMPLE_INTERVAL = 1.0


def nearest_rank(sorted_values: Sequence[float], percent: float) -> float:
    """``sorted_values[ceil(n * percent / 100) - 1]``: scheduler_perf's percentile (n > 0)."""
    n = len(sorted_values)
    index = max(0, math.ceil(n * percent / 100) - 1)
    return float(sorted_values[min(index, n - 1)])


def summarize(values: Sequence[float], percents: Sequence[int] = (50, 90, 95, 99)) -> dict[str, float]:
    """``{"avg", "p50", ...,"max", "count"}``; empty input gives ``{"count": 0}``."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    out: dict[str, float] = {"avg": sum(ordered) / len(ordered)}
    for p in percents:
        out[f"p{p}"] = nearest_rank(ordered, p)
    out["max"] = ordered[-1]
    out["count"] = len(ordered)
    return out


@dataclass
class ThroughputCollector:
    """Feed it ``tick(now, scheduled)`` once per ``SAMPLE_INTERVAL``; see the module docstring."""

    interval: float = SAMPLE_INTERVAL
    samples: list[float] = field(default_factory=list)
    started: bool = False
    last_count: int = 0
    last_time: float = 0.0
    skipped: int = 0
    #: (time, scheduled so far) at every tick, for plotting progress
    progress: list[tuple[float, int]] = field(default_factory=list)

    def tick(self, now: float, scheduled: int) -> None:
        self.progress.append((now, scheduled))
        if scheduled == 0:
            return
        if not self.started:
            self.started = True
            self.last_count, self.last_time = scheduled, now
            return
        new = scheduled - self.last_count
        if new == 0:
            self.skipped += 1
            return
        rate = new / (now - self.last_time)
        self.samples.extend([rate] * (self.skipped + 1))
        self.last_count, self.last_time, self.skipped = scheduled, now, 0

    def summary(self) -> dict[str, float]:
        return summarize(self.samples)
