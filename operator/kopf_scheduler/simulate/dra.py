"""ResourceClaims in the simulated cluster: the API server's side of the scheduler's claim writes, and
what kube-controller-manager's resource-claim controller does for a pending pod, so ``simulate`` can
tell which devices each claim gets.

- ``update`` is a PUT of a claim (``status`` kept) or of its ``status`` (only the status taken): 404 for
  an unknown claim, 409 when ``metadata.resourceVersion`` is not the stored one (the API server's
  messages), else stored with a new resourceVersion and echoed to the scheduler. ``get`` and ``patch``
  (a strategic merge deleting ``reservedFor`` entries by uid) likewise.
- ``create`` (a POST of a claim with ``metadata.generateName``: the name completed with five characters
  derived from the claim's owner, where the API server picks them at random) and ``delete`` serve the
  claims the scheduler makes for pods' extended resources backed by DRA.
- ``claims_for_pod`` is the resource-claim controller: for each ``resourceClaimTemplateName`` of a pod it
  makes the claim from the template, owned by the pod and named ``<pod>-<claim>-<5 characters>`` (the
  characters derived from the pod's uid, where the API server picks them at random), and records it in
  the pod's ``status.resourceClaimStatuses``. A missing template makes no claim: the pod waits.
- The devices' drivers: a device allocated with ``bindingConditions`` (``DRADeviceBindingConditions``)
  has them reported true by its driver right after the scheduler writes the allocation (a
  ``status.devices`` entry with each condition ``True``, reason ``Simulated``), so the pod's PreBind wait
  ends and it is bound, as in a cluster whose driver attaches the device. None of its
  ``bindingFailureConditions`` is reported.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, ObjectKind, object_key
from kopf_scheduler.simulate.conditional import check_update

#: the characters the API server draws a generated name's suffix from
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_KEEP = (RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)


@dataclass
class SimulatedClaims:
    #: the scheduler's watch of the other kinds: called with every claim written
    on_object: Callable[[ObjectKind[Any], Mapping[str, Any]], None] | None = None
    #: likewise, with (kind, namespace, name) of every claim deleted
    on_deleted: Callable[[ObjectKind[Any], str, str], None] | None = None
    _objects: dict[ObjectKind[Any], dict[tuple[str, str], dict[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in _KEEP}
    )
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def load(self, kind: ObjectKind[Any], obj: dict[str, Any]) -> dict[str, Any]:
        if kind not in self._objects:
            return obj
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault(
            "uid",
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind.plural}/{meta['namespace']}/{meta.get('name')}")),
        )
        if not str(meta.get("resourceVersion") or "").isdigit():
            meta["resourceVersion"] = str(next(self._versions))
        self._objects[kind][object_key(obj, True)] = obj
        return obj

    def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects[RESOURCE_CLAIMS].get((namespace, name))

    # -- the API server ----------------------------------------------------------------------------------
    def _locate(self, path: str) -> tuple[tuple[str, str], bool]:
        parts = path.strip("/").split("/")
        # apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>[/status]
        if len(parts) in (7, 8) and parts[:2] == ["apis", "resource.k8s.io"] and parts[5] == "resourceclaims":
            return (parts[4], parts[6]), len(parts) == 8
        raise APIError(404, f"the server could not find the requested resource ({path})")

    def get(self, path: str) -> dict[str, Any]:
        key, _ = self._locate(path)
        current = self.claim(*key)
        if current is None:
            raise APIError(404, f'resourceclaims.resource.k8s.io "{key[1]}" not found')
        return copy.deepcopy(current)

    def update(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        key, status = self._locate(path)
        what = f"resourceclaims.resource.k8s.io {json.dumps(key[1])}"
        current = check_update(self.claim(*key), obj, what)
        if status:
            stored = dict(copy.deepcopy(current), status=copy.deepcopy(dict(obj.get("status") or {})))
        else:
            stored = dict(copy.deepcopy(dict(obj)), status=copy.deepcopy(current.get("status") or {}))
        written = self._store(stored)
        reported = _binding_conditions_reported(stored)
        if reported is not None:
            self._store(reported)  # the driver's write comes after the scheduler's answer was made
        return written

    def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        parts = path.strip("/").split("/")
        if len(parts) != 6 or parts[:2] != ["apis", "resource.k8s.io"] or parts[5] != "resourceclaims":
            raise APIError(404, f"the server could not find the requested resource ({path})")
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta["namespace"] = parts[4]
        if not meta.get("name"):
            owner: Mapping[str, Any] = next(iter(meta.get("ownerReferences") or ()), {})
            base = str(meta.get("generateName") or "")
            digest = hashlib.sha256(f"{owner.get('uid')}/{base}".encode()).digest()
            # the API server's names.SimpleNameGenerator: the base cut to 58 characters, and five more
            meta["name"] = base[:58] + "".join(
                _SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5]
            )
        if (parts[4], meta["name"]) in self._objects[RESOURCE_CLAIMS]:
            raise APIError(409, f'resourceclaims.resource.k8s.io "{meta["name"]}" already exists')
        meta["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"resourceclaims/{parts[4]}/{meta['name']}"))
        return self._store(stored)

    def delete(self, path: str) -> None:
        key, _ = self._locate(path)
        if self._objects[RESOURCE_CLAIMS].pop(key, None) is None:
            raise APIError(404, f'resourceclaims.resource.k8s.io "{key[1]}" not found')
        if self.on_deleted is not None:
            self.on_deleted(RESOURCE_CLAIMS, *key)

    def patch(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        current = self.get(path)
        deleted = {
            entry.get("uid")
            for entry in (patch.get("status") or {}).get("reservedFor") or ()
            if entry.get("$patch") == "delete"
        }
        status = current.setdefault("status", {})
        status["reservedFor"] = [r for r in status.get("reservedFor") or () if r.get("uid") not in deleted]
        if not status["reservedFor"]:
            del status["reservedFor"]
        return self._store(current)

    def _store(self, stored: dict[str, Any]) -> dict[str, Any]:
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self._objects[RESOURCE_CLAIMS][object_key(stored, True)] = stored
        if self.on_object is not None:
            self.on_object(RESOURCE_CLAIMS, copy.deepcopy(stored))
        return copy.deepcopy(stored)

    # -- kube-controller-manager's resource-claim controller -----------------------------------------------
    def claims_for_pod(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The claims the controller makes for the pod (its status records them); none made twice."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        status = pod.setdefault("status", {})
        recorded = {s.get("name") for s in status.get("resourceClaimStatuses") or ()}
        made = []
        for pod_claim in spec.get("resourceClaims") or ():
            template_name = pod_claim.get("resourceClaimTemplateName")
            if template_name is None or pod_claim.get("name") in recorded:
                continue
            template = self._objects[RESOURCE_CLAIM_TEMPLATES].get((namespace, template_name))
            if template is None:
                continue
            name = _generated_name(meta["name"], str(pod_claim.get("name")), str(meta.get("uid")))
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": pod_claim.get("name")},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta.get("uid"),
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
            }
            made.append(self.load(RESOURCE_CLAIMS, claim))
            statuses = status.setdefault("resourceClaimStatuses", [])
            statuses.append({"name": pod_claim.get("name"), "resourceClaimName": name})
        return made


def _generated_name(pod: str, claim: str, uid: str) -> str:
    """``<pod>-<claim>-`` (both cut in proportion past 57 characters, as the controller cuts them) and
    five characters."""
    base = f"{pod}-{claim}-"
    if len(base) > 57:
        base = pod[: len(pod) * 57 // len(base)] + "-" + claim[: len(claim) * 57 // len(base)]
    digest = hashlib.sha256(f"{uid}/{claim}".encode()).digest()
    return base + "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])


def _devices(claim: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return [
        {k: result[k] for k in ("request", "driver", "pool", "device") if k in result}
        | ({"adminAccess": True} if result.get("adminAccess") else {})
        | {k: result[k] for k in ("shareID", "consumedCapacity") if result.get(k) is not None}
        for result in (allocation.get("devices") or {}).get("results") or ()
    ]


def claim_entries(claims: SimulatedClaims, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per ``spec.resourceClaims`` entry of the pod: the claim it uses and the devices allocated to it
    after the run (``[]`` while unallocated; claim None when it was never made)."""
    meta = pod["metadata"]
    namespace = meta.get("namespace") or "default"
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    }
    found = []
    for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = pod_claim.get("resourceClaimName") or statuses.get(pod_claim.get("name"))
        claim = claims.claim(namespace, name) if name else None
        devices = _devices(claim)
        found.append({"name": pod_claim.get("name"), "claim": name, "devices": devices})
    extended = extended_claim(claims, pod)
    if extended is not None:
        found.append(
            {"name": EXTENDED_RESOURCES, "claim": extended["metadata"]["name"], "devices": _devices(extended)}
        )
    return found


#: what the output calls the claim of a pod's extended resources backed by DRA
EXTENDED_RESOURCES = "<extended-resources>"
_EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def extended_claim(claims: SimulatedClaims, pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The claim the scheduler made for the pod's extended resources backed by DRA, if any."""
    meta = pod["metadata"]
    namespace = meta.get("namespace") or "default"
    for (ns, _), claim in claims._objects[RESOURCE_CLAIMS].items():
        claim_meta = claim.get("metadata") or {}
        if ns != namespace or (claim_meta.get("annotations") or {}).get(_EXTENDED_ANNOTATION) != "true":
            continue
        if any(ref.get("uid") == meta.get("uid") for ref in claim_meta.get("ownerReferences") or ()):
            return claim
    return None


def _binding_conditions_reported(claim: Mapping[str, Any]) -> dict[str, Any] | None:
    """``claim`` as the drivers write it once they have attached its devices that have binding
    conditions: each such device's ``status.devices`` entry with those conditions true; None when no
    device of its allocation waits for one."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
    devices = [dict(d) for d in status.get("devices") or () if isinstance(d, Mapping)]
    changed = False
    stamp = (status.get("allocation") or {}).get("allocationTimestamp") or "1970-01-01T00:00:00Z"
    for result in results:
        if not isinstance(result, Mapping):
            continue
        wanted = [c for c in result.get("bindingConditions") or () if isinstance(c, str)]
        if not wanted:
            continue
        where = {k: result.get(k) for k in ("driver", "pool", "device")}
        entry = next((d for d in devices if all(d.get(k) == v for k, v in where.items())), None)
        if entry is None:
            entry = dict(where)
            devices.append(entry)
        conditions = [dict(c) for c in entry.get("conditions") or () if isinstance(c, Mapping)]
        for kind in wanted:
            if any(c.get("type") == kind and c.get("status") == "True" for c in conditions):
                continue
            conditions = [c for c in conditions if c.get("type") != kind]
            conditions.append(
                {
                    "type": kind,
                    "status": "True",
                    "reason": "Simulated",
                    "message": "reported by the device's driver in the simulation",
                    "lastTransitionTime": stamp,
                }
            )
            changed = True
        entry["conditions"] = conditions
    if not changed:
        return None
    return dict(copy.deepcopy(dict(claim)), status=dict(copy.deepcopy(dict(status)), devices=devices))
