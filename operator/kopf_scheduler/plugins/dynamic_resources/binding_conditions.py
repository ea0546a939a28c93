"""Device binding conditions (``DRADeviceBindingConditions`` with ``DRAResourceClaimDeviceStatus``, as
kube-scheduler v1.37.2's ``dynamicresources.go`` checks them).

A device published with ``bindingConditions`` (and ``bindingFailureConditions``) is allocated with those
condition types copied into its allocation result; its driver then reports them in the claim's
``status.devices[]`` entry for the device (``conditions``, set through the status subresource). A claim
is ready for binding when, for every allocated device with binding conditions, all of them are true and
none of its failure conditions is; a failure condition that is true is an error naming it. A claim has
timed out once ``allocationTimestamp`` (written by PreBind) plus ``bindingTimeout`` is past.

- PreBind waits, polling the claims as the scheduler sees them every ``POLL_SECONDS`` from the start, until
  the pod's claims are ready, one fails, one times out (``device binding timeout: claim=<name>``) or
  ``bindingTimeout`` since the wait began has passed (``device binding timeout: context deadline
  exceeded``). The wait is a sleep on the scheduler's clock in the binding cycle's own task.
- Filter: an allocated claim that failed, or is not ready and timed out, is not available on the node
  (PostFilter then deallocates it, so that other devices can be tried).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kopf_scheduler.framework.objects import ResourceClaim

#: upstream's ``ErrDeviceBindingTimeout`` and ``ErrDeviceBindingFailed``
ERR_TIMEOUT = "device binding timeout"
ERR_FAILED = "device binding failed"
#: what ``context.DeadlineExceeded`` says when the wait itself runs out
DEADLINE_EXCEEDED = "context deadline exceeded"
#: ``wait.PollUntilContextTimeout``'s interval in PreBind
POLL_SECONDS = 5.0
#: the event PreBind records before it waits (type, reason, action, message)
PENDING_REASON = "BindingConditionsPending"
PENDING_ACTION = "Scheduling"
#: ``schedmetrics.BindingConditionsStatus*``
SUCCESS, FAILURE, TIMEOUT, ERROR = "success", "failure", "timeout", "error"


class BindingFailed(Exception):
    """A binding failure condition is true; the message is upstream's."""


def _results(claim: ResourceClaim) -> list[Mapping[str, Any]]:
    allocation = (claim.raw.get("status") or {}).get("allocation") or {}
    return [r for r in (allocation.get("devices") or {}).get("results") or () if isinstance(r, Mapping)]


def _conditions(claim: ResourceClaim, result: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The conditions of the device's ``status.devices`` entry (None: no entry)."""
    for entry in (claim.raw.get("status") or {}).get("devices") or ():
        if (
            isinstance(entry, Mapping)
            and entry.get("device") == result.get("device")
            and entry.get("driver") == result.get("driver")
            and entry.get("pool") == result.get("pool")
        ):
            return [c for c in entry.get("conditions") or () if isinstance(c, Mapping)]
    return None


def _find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _is_true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    found = _find(conditions, kind)
    return found is not None and found.get("status") == "True"


def claim_ready(claim: ResourceClaim) -> bool:
    """``isClaimReadyForBinding``: raises ``BindingFailed`` when a failure condition is true."""
    if claim.allocation is None:
        return False
    for result in _results(claim):
        wanted = result.get("bindingConditions") or []
        if not wanted:
            continue
        conditions = _conditions(claim, result)
        if conditions is None:
            return False
        for kind in result.get("bindingFailureConditions") or []:
            failed = _find(conditions, kind)
            if failed is not None and failed.get("status") == "True":
                reason = failed.get("reason") or ""
                message = json.dumps(str(failed.get("message") or ""), ensure_ascii=False)
                raise BindingFailed(f"{ERR_FAILED}: claim={claim.name}, reason={reason}, message={message}")
        if not all(_is_true(conditions, kind) for kind in wanted):
            return False
    return True


def parse_time(text: Any) -> float | None:
    """An RFC 3339 time of the API as seconds since the epoch (None when absent or unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    """``metav1.Time`` as the API writes it: RFC 3339, whole seconds, UTC."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim_timed_out(claim: ResourceClaim, timeout: float, wall_now: float) -> bool:
    """``isClaimTimeout``: the claim's allocation has devices with binding conditions (the field set,
    even empty) and was written more than ``timeout`` seconds before ``wall_now``."""
    allocation = (claim.raw.get("status") or {}).get("allocation") or {}
    written = parse_time(allocation.get("allocationTimestamp"))
    if written is None:
        return False
    return (
        any(r.get("bindingConditions") is not None for r in _results(claim)) and written + timeout < wall_now
    )


def has_binding_conditions(claims: Iterable[ResourceClaim]) -> bool:
    return any(r.get("bindingConditions") for claim in claims for r in _results(claim))


@dataclass(slots=True)
class DeviceSummary:
    """``BindingConditionsStatus``: one allocated device with binding conditions."""

    driver: str
    pool: str
    device: str
    pending: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def summaries(claim: ResourceClaim) -> list[DeviceSummary]:
    """``listBindingConditionsStatus``: per allocated device with binding conditions, those not true yet
    (all when the device has no status) and the failure conditions that are true."""
    out = []
    for result in _results(claim):
        wanted = list(result.get("bindingConditions") or [])
        if not wanted:
            continue
        summary = DeviceSummary(str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
        conditions = _conditions(claim, result)
        if conditions is None:
            summary.pending = wanted
        else:
            failing = result.get("bindingFailureConditions") or []
            summary.failed = [kind for kind in failing if _is_true(conditions, kind)]
            summary.pending = [kind for kind in wanted if not _is_true(conditions, kind)]
        out.append(summary)
    return out


def drivers(claim: ResourceClaim) -> list[str]:
    """The driver of every device result of the claim's allocation, in order."""
    return [str(r.get("driver")) for r in _results(claim)]


#: (profile, driver, status, seconds waited): one per device result of each allocated claim after a wait
WaitHook = Callable[[str, str, str, float], None]
#: (profile, driver, status): one per device with binding conditions after a wait
AllocationHook = Callable[[str, str, str], None]
