"""The selector of a pod's default spread constraints: upstream's ``helper.DefaultSelector``
(``pkg/scheduler/framework/plugins/helper/spread.go``).

The ``spec.selector`` maps of every Service in the pod's namespace that selects the pod are merged (a
Service without a selector selects nothing); then the pod's controller (its ``ownerReferences`` entry with
``controller: true``) adds its own: a ReplicationController's selector map is merged in, a ReplicaSet's
or StatefulSet's label selector requirements are ANDed on. An owner of another kind, or one not in the
store, adds nothing. An empty result means the default constraints do not apply to the pod.

The result is memoised on the pod per generation of the four kinds, so it is worked out once per pod
while Services and controllers do not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.objects import (
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    ClusterListers,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import LabelSelector, Requirement

_KINDS = (SERVICES, REPLICATION_CONTROLLERS, REPLICA_SETS, STATEFUL_SETS)
_MEMO = "PodTopologySpread.defaultSelector"


@dataclass(frozen=True, slots=True)
class DefaultSelection:
    #: ``None`` when nothing selects or owns the pod
    selector: LabelSelector | None
    #: what the selector came from, as ``Kind namespace/name``
    sources: tuple[str, ...]


NOTHING = DefaultSelection(None, ())


def controller_of(pod: PodInfo) -> Mapping[str, Any] | None:
    """``metav1.GetControllerOf``: the first owner reference with ``controller: true``."""
    meta = pod.raw.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _compute(objects: ClusterListers, pod: PodInfo) -> DefaultSelection:
    labels = pod.labels
    merged: dict[str, str] = {}
    sources: list[str] = []
    for service in objects.of(SERVICES).list(pod.namespace):
        if service.selects(labels):
            merged.update(service.selector or {})
            sources.append(f"Service {service.namespace}/{service.name}")
    added: tuple[Requirement, ...] = ()
    owner = controller_of(pod)
    if owner is not None:
        api_version, kind, name = owner.get("apiVersion"), owner.get("kind"), str(owner.get("name") or "")
        if (api_version, kind) == ("v1", "ReplicationController"):
            rc = objects.of(REPLICATION_CONTROLLERS).get(pod.namespace, name)
            if rc is not None:
                merged.update(rc.selector)
                sources.append(f"ReplicationController {pod.namespace}/{name}")
        elif (api_version, kind) in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
            store = REPLICA_SETS if kind == "ReplicaSet" else STATEFUL_SETS
            found = objects.of(store).get(pod.namespace, name)
            if found is not None:
                added = found.requirements
                sources.append(f"{kind} {pod.namespace}/{name}")
    requirements = tuple(Requirement(k, "In", frozenset({v})) for k, v in sorted(merged.items())) + added
    if not requirements:
        return NOTHING
    return DefaultSelection(LabelSelector(requirements), tuple(sources))


def default_selection(objects: ClusterListers, pod: PodInfo) -> DefaultSelection:
    generation = objects.generation(*_KINDS)
    found = pod.extra.get(_MEMO)
    if found is None or found[0] != generation:
        found = pod.extra[_MEMO] = (generation, _compute(objects, pod))
    return found[1]  # type: ignore[no-any-return]
