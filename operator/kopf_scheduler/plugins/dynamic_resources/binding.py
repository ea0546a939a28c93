"""The claim writes DynamicResources makes (``bindClaim``, ``Unreserve`` and ``PostFilter`` upstream).
The scheduler writes nothing else of DRA objects: the finalizer and the status of claims it allocates.

- PreBind, per claim not yet reserved for the pod: for a claim the scheduler allocated, the finalizer
  ``resource.kubernetes.io/delete-protection`` (a plain update, unless present), then ``status``:
  the allocation and the pod appended to ``reservedFor``. A conflict re-reads the claim and tries again
  (client-go's ``retry.DefaultRetry``: 5 attempts); a claim deleted or allocated elsewhere meanwhile is
  an error. The claim as written is assumed at once; its in-flight allocation is dropped once the whole
  PreBind succeeded (another pod of the claim waits until then), or by Unreserve.
- Unreserve of a claim reserved for the pod: a strategic-merge patch deleting the pod's entry from
  ``reservedFor``; failures are logged (the next attempt finds the claim as it is).
- PostFilter's deallocation: ``status`` without allocation, reservations and device status.
- With device binding conditions on (``DRADeviceBindingConditions`` and ``DRAResourceClaimDeviceStatus``),
  the status write also gives the allocation its ``allocationTimestamp`` (now, unless it has one), and a
  claim found deallocated meanwhile is an error.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from kopf_scheduler.framework.client import APIError, ClusterClient
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS, ResourceClaim
from kopf_scheduler.framework.objects.dra import CLAIM_FINALIZER, parse_resource_claim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.dynamic_resources.binding_conditions import format_time
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager

log = logging.getLogger("kopf_scheduler.dynamic_resources")
#: client-go's ``retry.DefaultRetry.Steps``
RETRY_STEPS = 5
_TASKS: set[asyncio.Task[Any]] = set()


class ClaimWriteError(Exception):
    """A claim write that failed; the message is upstream's."""


def claim_path(claim: ResourceClaim) -> str:
    return RESOURCE_CLAIMS.object_path(claim.namespace, claim.name)


def spawn(coro: Coroutine[Any, Any, Any]) -> None:
    """Runs a fire-and-forget write on the running loop (none: dropped, as there is no cluster)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        coro.close()
        return
    task = loop.create_task(coro)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def _writable(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a stored claim whose top level, ``metadata`` and ``status`` may be changed: stored values
    are never changed in place, so the rest is shared with the stored claim instead of copied."""
    out = dict(raw)
    out["metadata"] = dict(out.get("metadata") or {})
    out["status"] = dict(out.get("status") or {})
    return out


def with_allocation(claim: ResourceClaim, allocation: Mapping[str, Any]) -> ResourceClaim:
    """The claim as Reserve pictures it: finalized and allocated (upstream's in-flight claim)."""
    raw = _writable(claim.raw)
    meta = raw["metadata"]
    if CLAIM_FINALIZER not in (meta.get("finalizers") or []):
        meta["finalizers"] = [*(meta.get("finalizers") or []), CLAIM_FINALIZER]
    raw["status"]["allocation"] = copy.deepcopy(dict(allocation))
    return parse_resource_claim(raw)


async def bind_claim(
    client: ClusterClient,
    manager: DraManager,
    claim: ResourceClaim,
    allocation: Mapping[str, Any] | None,
    pod: PodInfo,
    stamp: Callable[[], float] | None = None,
) -> ResourceClaim:
    """Records the allocation (if the scheduler made it) and the pod's reservation; returns the claim as
    the API server stored it. ``stamp``: the wall clock, when binding conditions are on (the allocation's
    ``allocationTimestamp``). The allocation stays in flight: the caller drops it once PreBind succeeded
    (upstream's ``prebindSuccessCleanup``), else Unreserve does. Raises ``ClaimWriteError``."""
    path = claim_path(claim)
    raw = _writable(claim.raw)
    for attempt in range(RETRY_STEPS):
        if attempt:  # a conflict: the latest claim, and again
            try:
                latest = await client.get_object(path)
            except APIError as e:
                raise ClaimWriteError(f"get updated claim {claim.key} after conflict: {e.message}") from None
            if latest is None:
                gone = f'resourceclaims.resource.k8s.io "{claim.name}" not found'
                raise ClaimWriteError(f"get updated claim {claim.key} after conflict: {gone}")
            raw = latest
        try:
            written = await _write(client, path, raw, allocation, pod, claim.key, stamp)
        except _Failed as e:
            if not e.conflict or attempt == RETRY_STEPS - 1:
                raise ClaimWriteError(str(e)) from None
            continue
        if allocation is not None:
            manager.assume(written)
        return written
    raise AssertionError("unreachable")


class _Failed(Exception):
    def __init__(self, message: str, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


async def _write(
    client: ClusterClient,
    path: str,
    raw: dict[str, Any],
    allocation: Mapping[str, Any] | None,
    pod: PodInfo,
    key: str,
    stamp: Callable[[], float] | None = None,
) -> ResourceClaim:
    meta = raw.setdefault("metadata", {})
    if meta.get("deletionTimestamp") is not None:
        raise _Failed(f"claim {key} got deleted in the meantime")
    status = raw.setdefault("status", {})
    if allocation is not None:
        if status.get("allocation") is not None:
            raise _Failed(f"claim {key} got allocated elsewhere in the meantime")
        if CLAIM_FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), CLAIM_FINALIZER]
            try:
                raw = await client.update_object(path, raw)
            except APIError as e:
                raise _Failed(f"add finalizer to claim {key}: {e.message}", e.status == 409) from None
            status = raw.setdefault("status", {})
        status["allocation"] = copy.deepcopy(dict(allocation))
    reserved = list(status.get("reservedFor") or [])
    reserved.append({"resource": "pods", "name": pod.name, "uid": pod.uid})
    status["reservedFor"] = reserved
    if stamp is not None:
        written = status.get("allocation")
        if written is None:
            raise _Failed(f"claim {key} got deallocated elsewhere in the meantime")
        if written.get("allocationTimestamp") is None:
            status["allocation"] = {**written, "allocationTimestamp": format_time(stamp())}
    try:
        stored = await client.update_object(path + "/status", raw)
    except APIError as e:
        what = "add allocation and reservation to" if allocation is not None else "add reservation to"
        raise _Failed(f"{what} claim {key}: {e.message}", e.status == 409) from None
    return parse_resource_claim(stored)


async def unreserve_claim(client: ClusterClient, claim: ResourceClaim, pod: PodInfo) -> None:
    patch = {
        "metadata": {"uid": claim.uid},
        "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
    }
    try:
        await client.patch_object(claim_path(claim) + "/status", patch)
    except APIError as e:
        log.warning("unreserve of resourceclaim %s for pod %s failed: %s", claim.key, pod.key, e.message)


async def deallocate_claim(client: ClusterClient, claim: ResourceClaim) -> None:
    raw = copy.deepcopy(dict(claim.raw))
    status = raw.setdefault("status", {})
    for field in ("reservedFor", "allocation", "devices"):
        status.pop(field, None)
    try:
        await client.update_object(claim_path(claim) + "/status", raw)
    except APIError as e:
        log.warning("deallocation of resourceclaim %s failed: %s", claim.key, e.message)
