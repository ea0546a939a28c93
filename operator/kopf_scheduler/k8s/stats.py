"""Counters of the API traffic, kept on the client so a metrics exporter can read them later.

Plain integers and dicts, updated from the event loop only: reading them is always safe and costs nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: bind latency buckets (seconds): 1 ms doubling to ~16 s, like the scheduler's own latency histograms.
LATENCY_BUCKETS: tuple[float, ...] = tuple(0.001 * 2**i for i in range(15))


@dataclass
class Histogram:
    """A cumulative-bucket histogram in the Prometheus shape (``le`` upper bounds, count, sum)."""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    count: int = 0
    sum: float = 0.0
    max: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        self.max = max(self.max, value)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, count of observations <= le)`` pairs, ending with ``(inf, count)``."""
        out, running = [], 0
        for bound, n in zip(self.buckets, self.counts, strict=True):
            running += n
            out.append((bound, running))
        out.append((float("inf"), self.count))
        return out

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0


@dataclass
class ClientStats:
    #: HTTP requests by (method, status); status 0 means no answer (connection error or timeout).
    requests: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: credentials rebuilt after a 401.
    credential_refreshes: int = 0
    binds: Counter[str] = field(default_factory=Counter)  # "ok", "conflict", "gone", "error"
    bind_latency: Histogram = field(default_factory=Histogram)
    #: events asked for by the scheduler (record_scheduled / record_failure calls).
    events_recorded: int = 0
    #: occurrences merged into an existing event (a series) instead of a new API object.
    events_aggregated: int = 0
    #: event writes sent, by kind: "create" (POST) and "patch" (series update).
    events_sent: Counter[str] = field(default_factory=Counter)
    #: events lost: the send queue was full, or the API refused or never answered.
    events_dropped: int = 0
    status_patches_sent: int = 0
    #: condition updates not sent because the pod already says the same.
    status_patches_skipped: int = 0
    #: condition updates merged into one still waiting to be sent for the same pod.
    status_patches_coalesced: int = 0
    status_patch_errors: int = 0

    def requests_total(self) -> int:
        return sum(self.requests.values())
