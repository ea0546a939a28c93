"""Timestamps as the API server writes them: ``Time`` (RFC 3339, seconds) and ``MicroTime`` (microseconds)."""

from __future__ import annotations

from datetime import UTC, datetime


def micro_time(epoch: float) -> str:
    """``metav1.MicroTime``: ``2006-01-02T15:04:05.000000Z`` (events' eventTime, leases' renewTime)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(epoch: float) -> str:
    """``metav1.Time``: ``2006-01-02T15:04:05Z`` (conditions' lastTransitionTime)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str) -> float:
    """Either form (or any RFC 3339 offset) back to epoch seconds."""
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    return datetime.fromisoformat(text).timestamp()
