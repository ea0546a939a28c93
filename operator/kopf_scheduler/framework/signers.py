"""The pieces of a pod's signature that several plugins share (upstream's ``framework/signers.go`` in
``k8s.io/kube-scheduler``): the signer names, and canonical forms of the pod's tolerations, volumes,
host ports and node affinity.

A signature is only ever compared for equality, so each form keeps exactly what the plugins that sign
with it read, in an order that does not depend on how the pod lists it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kopf_scheduler.framework.objects.extended_resources import DeviceClassResolver
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status

DYNAMIC_RESOURCES = "v1.Pod.Spec.DynamicResources"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def requests(pod: PodInfo, classes: DeviceClassResolver | None) -> list[tuple[str, Any]] | Status:
    """NodeResourcesFit's and NodeResourcesBalancedAllocation's signature: the pod's requests; unsigned when
    DRA would allocate one of them (``classes``: the DeviceClasses standing for extended resources, None
    with ``DRAExtendedResource`` off)."""
    if classes is not None and any(classes.get(n) is not None for n, a in pod.spec_requests.items() if a):
        return Status(
            Code.UNSCHEDULABLE, ("signature disabled when dra extended resources are used in the cluster",)
        )
    return [(RESOURCES, sorted(pod.spec_requests.items()))]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _containers(pod: PodInfo) -> Iterable[Mapping[str, Any]]:
    spec = pod.spec
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, Mapping):
                yield container


def host_ports(pod: PodInfo) -> list[int]:
    """The host ports the pod's containers and init containers ask for, sorted, each once."""
    ports = {
        port.get("hostPort")
        for container in _containers(pod)
        for port in container.get("ports") or ()
        if isinstance(port, Mapping) and port.get("hostPort")
    }
    return sorted(p for p in ports if isinstance(p, int))


def tolerations(pod: PodInfo) -> list[Any]:
    """The pod's tolerations ordered by key, then value."""
    listed = [t for t in pod.spec.get("tolerations") or () if isinstance(t, Mapping)]
    return sorted(listed, key=lambda t: (str(t.get("key") or ""), str(t.get("value") or "")))


def volumes(pod: PodInfo) -> list[str]:
    """The sources of the pod's volumes but ConfigMaps and Secrets (which never change where a pod fits,
    and name each pod's own objects), sorted."""
    out = []
    for volume in pod.spec.get("volumes") or ():
        if not isinstance(volume, Mapping) or "configMap" in volume or "secret" in volume:
            continue
        out.append(_canonical({k: v for k, v in volume.items() if k != "name"}))
    return sorted(out)


def _requirements(reqs: Any) -> list[str]:
    out = []
    for req in reqs or ():
        if isinstance(req, Mapping):
            values = req.get("values")
            canon = dict(req)
            if isinstance(values, list):
                canon["values"] = sorted(str(v) for v in values)
            out.append(_canonical(canon))
    return sorted(out)


def _term(term: Any) -> dict[str, list[str]]:
    term = term if isinstance(term, Mapping) else {}
    return {
        "MatchExpressions": _requirements(term.get("matchExpressions")),
        "MatchFields": _requirements(term.get("matchFields")),
    }


def node_affinity(pod: PodInfo) -> Any:
    """The pod's node affinity with every list in a canonical order, or None without one."""
    affinity = pod.affinity.get("nodeAffinity")
    if not isinstance(affinity, Mapping):
        return None
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    preferred = [
        _canonical({"Weight": t.get("weight"), "Preference": _term(t.get("preference"))})
        for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if isinstance(t, Mapping)
    ]
    return {
        "Required": sorted(_canonical(_term(t)) for t in terms or ()),
        "Preferred": sorted(preferred),
    }


def signature(scheduler_name: str, fragments: Iterable[tuple[str, Any]]) -> str:
    """The signature of a pod from its plugins' fragments (a later fragment of the same signer name wins,
    as upstream's map does)."""
    merged: dict[str, Any] = {SCHEDULER_NAME: scheduler_name}
    for key, value in fragments:
        merged[key] = value
    return _canonical(merged)
