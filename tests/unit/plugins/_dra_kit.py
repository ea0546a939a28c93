"""DRA objects, pods with claims, a handle with object stores and a recording client, for the
DynamicResources tests (the shapes of upstream's ``st.MakeResourceClaim()``, ``MakeResourceSlice``)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod

DRIVER = "gpu.example.com"
_KINDS = {kind.kind: kind for kind in WATCHED_KINDS}


def device_class(
    name: str = "gpu", *selectors: str, config: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def device(name: str, **attributes: Any) -> dict[str, Any]:
    """A device; ``memory`` (a quantity string) becomes a capacity, the other keywords attributes."""
    out: dict[str, Any] = {"name": name, "attributes": {}}
    for key, value in attributes.items():
        if key == "memory":
            out["capacity"] = {"memory": {"value": value}}
        elif isinstance(value, bool):
            out["attributes"][key] = {"bool": value}
        elif isinstance(value, int):
            out["attributes"][key] = {"int": value}
        else:
            out["attributes"][key] = {"string": value}
    return out


def resource_slice(
    node: str, *devices: dict[str, Any], name: str | None = None, pool: str | None = None, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
        "devices": list(devices),
    }
    if node:
        body["nodeName"] = node
    body.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-slice"},
        "spec": body,
    }


def request(name: str = "req", device_class_name: str = "gpu", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class_name, **exactly}}


_UIDS = itertools.count(1)


def claim(
    name: str,
    *requests: dict[str, Any],
    namespace: str = "default",
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    owner_uid: str | None = None,
    allocation: dict[str, Any] | None = None,
    reserved_for: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"claim-{name}",
        "resourceVersion": "1",
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": True}
        ]
    devices: dict[str, Any] = {"requests": list(requests) or [request()]}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": uid, "uid": uid} for uid in reserved_for]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": devices},
        "status": status,
    }


def allocated_on(node: str, *device_names: str, request_name: str = "req") -> dict[str, Any]:
    results = [{"request": request_name, "driver": DRIVER, "pool": node, "device": d} for d in device_names]
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [term]}}


def pod(
    name: str = "p", *claims: str, uid: str | None = None, templates: Mapping[str, str | None] | None = None
) -> PodInfo:
    """A pod using ``claims`` by name; ``templates``: pod claim name -> the claim its template made (None:
    not made yet)."""
    builder = make_pod().name(name).uid(uid or name)
    entries: list[dict[str, Any]] = [{"name": c, "resourceClaimName": c} for c in claims]
    statuses = []
    for pod_claim, made in (templates or {}).items():
        entries.append({"name": pod_claim, "resourceClaimTemplateName": "tmpl"})
        if made is not None:
            statuses.append({"name": pod_claim, "resourceClaimName": made})
    raw = builder.obj()
    if entries:
        raw["spec"]["resourceClaims"] = entries
    if statuses:
        raw.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return PodInfo(raw)


def node(name: str, **labels: str) -> NodeInfo:
    return NodeInfo(
        {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}, "status": {}}
    )


def objects(*raws: Mapping[str, Any]) -> ClusterObjects:
    store = ClusterObjects(WATCHED_KINDS)
    for raw in raws:
        store.store(_KINDS[raw["kind"]]).upsert(copy.deepcopy(dict(raw)))
    return store


class RecordingClient:
    """The API server's side of claim writes, over the stores: PUTs check resourceVersion, every write is
    recorded (method, path, body) and lands in the store as the watch would deliver it."""

    def __init__(self, store: ClusterObjects) -> None:
        self.store = store
        self.writes: list[tuple[str, str, Any]] = []
        self.fail_status: APIError | None = None
        self.fail_create: APIError | None = None
        self.events: list[tuple[str, str, str, str, str]] = []
        self._versions = itertools.count(100)

    def _claim(self, path: str) -> tuple[str, str, bool]:
        parts = path.strip("/").split("/")
        return parts[4], parts[6], parts[-1] == "status"

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("PUT", path, copy.deepcopy(dict(obj))))
        if self.fail_status is not None and path.endswith("/status"):
            raise self.fail_status
        namespace, name, _ = self._claim(path)
        kind = _KINDS["ResourceClaim"]
        current = self.store.store(kind).get(namespace, name)
        if current is None:
            raise APIError(404, f'resourceclaims.resource.k8s.io "{name}" not found')
        if obj["metadata"].get("resourceVersion") != current.resource_version:
            raise APIError(
                409,
                f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "{name}": '
                "the object has been modified",
            )
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self.store.store(kind).upsert(stored)
        return copy.deepcopy(stored)

    async def get_object(self, path: str) -> dict[str, Any] | None:
        namespace, name, _ = self._claim(path)
        current = self.store.store(_KINDS["ResourceClaim"]).get(namespace, name)
        return None if current is None else copy.deepcopy(dict(current.raw))

    async def patch_object(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self.writes.append(("PATCH", path, copy.deepcopy(dict(patch))))
        return {}

    async def create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A claim POSTed to its collection: named from ``generateName`` and ``xxxxx``, stored."""
        self.writes.append(("POST", path, copy.deepcopy(dict(obj))))
        if self.fail_create is not None:
            raise self.fail_create
        stored = copy.deepcopy(dict(obj))
        meta = stored["metadata"]
        meta["name"] = meta.get("name") or meta["generateName"] + "xxxxx"
        meta["namespace"] = path.strip("/").split("/")[4]
        meta["uid"] = f"claim-{meta['name']}"
        meta["resourceVersion"] = str(next(self._versions))
        self.store.store(_KINDS["ResourceClaim"]).upsert(stored)
        return copy.deepcopy(stored)

    async def delete_object(self, path: str) -> None:
        self.writes.append(("DELETE", path, None))
        namespace, name, _ = self._claim(path)
        if self.store.store(_KINDS["ResourceClaim"]).delete(namespace, name) is None:
            raise APIError(404, f'resourceclaims.resource.k8s.io "{name}" not found')

    def record_event(self, pod: PodInfo, kind: str, reason: str, action: str, note: str) -> None:
        self.events.append((pod.name, kind, reason, action, note))


class Handle:
    def __init__(self, store: ClusterObjects, gates: FeatureGates = DEFAULT_GATES) -> None:
        self.objects = store
        self.client = RecordingClient(store)
        self.feature_gates = gates
        self.clock = VirtualClock()
        self.profile_name = "default-scheduler"
