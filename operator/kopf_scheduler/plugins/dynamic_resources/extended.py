"""Extended resources backed by DRA (``DRAExtendedResource``; upstream's ``extendeddynamicresources.go``).

A pod asking for an extended resource that a DeviceClass stands for (``example.com/gpu: 2``, or
``deviceclass.resource.kubernetes.io/<class>``; ``framework/objects/extended_resources.py``) gets its devices
through one ResourceClaim the scheduler makes for it:

- PreFilter: the pod's claim of extended resources from an earlier attempt (annotated
  ``resource.kubernetes.io/extended-resource-claim: "true"``, controlled by the pod), else one in memory
  only, named ``<extended-resources>`` with a temporary uid, to be created as ``<pod>-extended-resources-``
  plus the API server's five characters.
- Filter, per node: a resource the node advertises in its allocatable is the node's own (NodeResourcesFit
  checks it); the others become the claim's requests, one per container (``container-<i>-request-<j>``,
  ``i`` the container's index among init containers then containers, ``j`` the resource's among the
  container's requests sorted by name), the devices of init containers that run to completion shared
  with later ones as upstream shares them. A claim left over from an earlier attempt rejects every node
  (``cannot schedule extended resource claim``); PostFilter then deletes it and the pod is tried anew.
- Reserve keeps the node's allocation in flight under the temporary uid. PreBind creates the claim
  (owner: the pod), records its allocation and the pod's reservation as for any claim, and writes the
  pod's ``status.extendedResourceClaimStatus`` (the claim's name, and which request serves which
  container's resource). Unreserve drops the allocation in flight and deletes a claim PreBind created.

One difference from v1.37.2: on a node that advertises every extended resource the pod asks for, a pod
that also has claims of its own allocates those only. Upstream (read, not run) then allocates a variant
of the claim of extended resources without requests too and creates it in PreBind, which fails (at the
latest on its empty request mappings, ``nil or empty request mappings``); Unreserve deletes it, and every
retry does the same.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.client import APIError, ClusterClient
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS, ResourceClaim
from kopf_scheduler.framework.objects.dra import CLAIM_FINALIZER, parse_resource_claim
from kopf_scheduler.framework.objects.extended_resources import (
    DeviceClassResolver,
    is_dra_extended_resource_name,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable
from kopf_scheduler.plugins.dynamic_resources.binding import (
    ClaimWriteError,
    bind_claim,
    log,
    spawn,
    with_allocation,
)
from kopf_scheduler.plugins.dynamic_resources.extended_requests import RequestMapping, requests_and_mappings
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager

#: the name of the claim while it is in memory only (not a valid name: no claim of the API has it)
SPECIAL_NAME = "<extended-resources>"
#: ``resourceapi.ExtendedResourceClaimAnnotation``
CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
CANNOT_SCHEDULE = "cannot schedule extended resource claim"
CANNOT_FIT = "cannot fit resource"
DELETED = "deletion of ResourceClaim completed"
#: upstream's ``AssumeExtendedResourceTimeoutDefaultSeconds``: how long PreBind waits for the created
#: claim to reach the claims store (its allocation stays in flight until then)
ASSUME_TIMEOUT_SECONDS = 120.0
_POLL_SECONDS = 0.05

#: a node's variant of the claim (its requests those DRA serves there) and the pod's request mappings
Variant = tuple[ResourceClaim, list[RequestMapping]]


@dataclass(slots=True)
class Extended:
    """The pod's claim of extended resources in one scheduling attempt."""

    #: in memory (``SPECIAL_NAME``) until PreBind creates it; or the claim of an earlier attempt
    claim: ResourceClaim
    #: the uid its allocation is in flight under (the temporary one while in memory)
    initial_uid: str
    #: the pod's requests of DRA extended resource names (positive)
    requests: dict[str, int]
    #: which class a resource stands for
    classes: DeviceClassResolver
    #: per set of resources left to DRA: the node's variant of the claim and its request mappings
    variants: dict[frozenset[str], Variant] = field(default_factory=dict)
    #: per variant (by identity): the claims to allocate on a node of that variant
    pending: dict[int, list[ResourceClaim]] = field(default_factory=dict)
    #: node -> its variant, for the nodes Filter found feasible with devices to allocate
    node_claims: dict[str, Variant] = field(default_factory=dict)
    #: the allocation Reserve took (None: nothing allocated for the extended resources)
    allocation: dict[str, Any] | None = None

    @property
    def in_memory(self) -> bool:
        return self.claim.name == SPECIAL_NAME

    def claims_for(self, variant: ResourceClaim, user: list[ResourceClaim]) -> list[ResourceClaim]:
        """The claims to allocate on a node of ``variant``: ``user`` (the pod's unallocated claims) and
        the variant, the same list for every such node (so the allocator's plan is made once)."""
        claims = self.pending.get(id(variant))
        if claims is None:
            claims = self.pending[id(variant)] = [*user, variant]
        return claims


def find_claim(pod: PodInfo, claims: Sequence[ResourceClaim]) -> ResourceClaim | None:
    """``findExtendedResourceClaim``: the annotated claim the pod controls."""
    for claim in claims:
        meta = claim.raw.get("metadata") or {}
        if (meta.get("annotations") or {}).get(CLAIM_ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or ():
            if ref.get("name") == pod.name and ref.get("controller") is True and ref.get("uid") == pod.uid:
                return claim
    return None


def pre_filter(
    pod: PodInfo, classes: DeviceClassResolver, claims: Callable[[], Sequence[ResourceClaim]]
) -> Extended | None:
    """``preFilterExtendedResources``: None when the pod asks for no resource a class stands for."""
    requests = {
        name: amount
        for name, amount in pod.spec_requests.items()
        if amount > 0 and is_dra_extended_resource_name(name)
    }
    if not any(classes.get(name) is not None for name in requests):
        return None
    found = find_claim(pod, claims())
    if found is not None:
        return Extended(found, found.uid, requests, classes)
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": SPECIAL_NAME,
            "uid": str(uuid.uuid4()),
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
            "annotations": {CLAIM_ANNOTATION: "true"},
        },
        "spec": {},
    }
    claim = parse_resource_claim(raw)
    return Extended(claim, claim.uid, requests, classes)


def for_node(ext: Extended, pod: PodInfo, node: NodeInfo) -> Variant | Status | None:
    """``filterExtendedResources``: the node's variant of the claim (None: DRA has nothing to allocate
    for the extended resources there), or the status rejecting the node."""
    if ext.claim.requests:
        return unresolvable(CANNOT_SCHEDULE)
    classes = ext.classes
    delegated = set()
    for name in ext.requests:
        allocatable = node.allocatable.get(name)
        if classes.get(name) is not None and not allocatable:
            delegated.add(name)
        elif allocatable is None:
            return unresolvable(CANNOT_FIT)
    if not delegated or ext.claim.allocation is not None:
        return None
    key = frozenset(delegated)
    variant = ext.variants.get(key)
    if variant is None:
        requests, mappings = requests_and_mappings(pod.spec, sorted(delegated), classes)
        raw = copy.deepcopy(dict(ext.claim.raw))
        raw["spec"] = {"devices": {"requests": requests}}
        variant = ext.variants[key] = (parse_resource_claim(raw), mappings)
    return variant


# -- the API writes ----------------------------------------------------------------------------------------
async def create_claim(
    client: ClusterClient, variant: ResourceClaim, hooks: Sequence[Callable[[str], None]] = ()
) -> ResourceClaim:
    """``createExtendedResourceClaimInAPI``: the node's variant, created with a generated name; ``hooks``
    hear ``success`` or ``failure`` (``ResourceClaimCreatesTotal``)."""
    raw = copy.deepcopy(dict(variant.raw))
    raw.pop("status", None)
    meta = raw["metadata"]
    meta.pop("name", None)
    meta.pop("uid", None)
    path = RESOURCE_CLAIMS.object_path(variant.namespace, "").rstrip("/")
    try:
        created = await client.create_object(path, raw)
    except APIError as e:
        for hook in hooks:
            hook("failure")
        raise ClaimWriteError(
            f"create claim for extended resources {variant.namespace}/: {e.message}"
        ) from None
    for hook in hooks:
        hook("success")
    return parse_resource_claim(created)


async def patch_pod_status(
    client: ClusterClient, pod: PodInfo, claim_name: str, mappings: Sequence[RequestMapping]
) -> None:
    """``patchPodExtendedResourceClaimStatus``."""
    if not mappings:
        raise ClaimWriteError(
            f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
            "ExtendedResourceClaimStatus"
        )
    status = {"requestMappings": [dict(m) for m in mappings], "resourceClaimName": claim_name}
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
    try:
        await client.patch_object(path, {"status": {"extendedResourceClaimStatus": status}})
    except APIError as e:
        raise ClaimWriteError(
            f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {e.message}"
        ) from None


async def delete_claim(client: ClusterClient, claim: ResourceClaim) -> None:
    """``deleteClaim``: the finalizer removed (a plain update, retried on conflict with the latest
    claim), then the claim deleted; a claim gone already is fine. Raises ``ClaimWriteError``."""
    path = RESOURCE_CLAIMS.object_path(claim.namespace, claim.name)
    raw: dict[str, Any] = copy.deepcopy(dict(claim.raw))
    for attempt in range(5):  # client-go's retry.DefaultRetry
        if attempt:
            try:
                latest = await client.get_object(path)
            except APIError as e:
                raise ClaimWriteError(f"get resourceclaim {claim.key}: {e.message}") from None
            if latest is None:
                raise ClaimWriteError(
                    f'get resourceclaim {claim.key}: resourceclaims.resource.k8s.io "{claim.name}" not found'
                )
            raw = latest
        meta = raw.setdefault("metadata", {})
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != CLAIM_FINALIZER]
        if not meta["finalizers"]:
            del meta["finalizers"]
        try:
            await client.update_object(path, raw)
            break
        except APIError as e:
            if e.status != 409 or attempt == 4:
                raise ClaimWriteError(f"update resourceclaim {claim.key}: {e.message}") from None
    try:
        await client.delete_object(path)
    except APIError as e:
        if e.status != 404:
            raise ClaimWriteError(str(e.message)) from None


def reserve(manager: DraManager, ext: Extended, variant: ResourceClaim, allocation: dict[str, Any]) -> None:
    """Reserve's part: the node's allocation kept in flight under the claim's first uid."""
    ext.allocation = allocation
    manager.signal_pending_allocation(ext.initial_uid, with_allocation(variant, allocation))


def unreserve(client: ClusterClient, manager: DraManager, ext: Extended) -> None:
    """``unreserveExtendedResourceClaim``: the allocation in flight dropped, and a claim that exists in
    the API deleted (in the background; a failure is logged)."""
    if manager.remove_pending_allocation(ext.initial_uid):
        manager.restore(ext.claim.namespace, ext.claim.name)
    if not ext.in_memory:
        spawn(delete_logged(client, ext.claim))


async def delete_logged(client: ClusterClient, claim: ResourceClaim) -> None:
    try:
        await delete_claim(client, claim)
    except ClaimWriteError as e:
        log.warning("delete of resourceclaim %s failed: %s", claim.key, e)


async def bind(
    client: ClusterClient,
    manager: DraManager,
    ext: Extended,
    pod: PodInfo,
    node: str,
    stamp: Callable[[], float] | None = None,
) -> None:
    """PreBind's part (``bindClaim`` for the claim of extended resources): the claim created (from the
    node's variant) if it is in memory, its allocation and the pod's reservation written, the pod's
    ``extendedResourceClaimStatus`` written, and the claim assumed once the store has it. The allocation
    stays in flight (under the temporary uid) for the caller to drop once PreBind succeeded. ``stamp``:
    as for ``binding.bind_claim``. Raises
    ``ClaimWriteError``; ``ext.claim`` is then the claim as far as it was written (Unreserve deletes it)."""
    if ext.claim.reserved_for_pod(pod.uid):
        return
    if ext.allocation is None and not ext.claim.requests:
        return  # the node's device plugin serves every extended resource
    variant = ext.node_claims.get(node)
    if ext.in_memory:
        if variant is None:
            raise ClaimWriteError(f"extended resource claim not found for node {node}")
        ext.claim = await create_claim(client, variant[0], manager.claim_create_hooks)
    written = await bind_claim(client, manager, ext.claim, ext.allocation, pod, stamp)
    ext.claim = written
    await patch_pod_status(client, pod, written.name, variant[1] if variant is not None else ())
    if await until_stored(manager, written):
        manager.assume(written)


async def until_stored(store: DraManager, claim: ResourceClaim) -> bool:
    """``waitForExtendedClaimInAssumeCache``: waits (at most ``ASSUME_TIMEOUT_SECONDS``) until the claims
    store has the created claim, so it can be assumed; False when it never came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ASSUME_TIMEOUT_SECONDS
    while store.get_api(claim.namespace, claim.name) is None:
        if loop.time() > deadline:
            return False
        await asyncio.sleep(_POLL_SECONDS)
    return True
