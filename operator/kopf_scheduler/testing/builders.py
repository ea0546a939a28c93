"""Fluent builders of plain dicts shaped like API objects (the shape handlers receive).

``make_pod().name("p").req(cpu="500m").toleration(key="k", operator="Exists").obj()``
``make_node().name("n1").capacity(cpu="4", memory="32Gi", pods=110).label("zone", "a").obj()``
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

_uids = itertools.count(1)


class PodBuilder:
    def __init__(self) -> None:
        self._pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "", "namespace": "default", "uid": f"pod-uid-{next(_uids)}"},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        return self._pod["spec"]

    @property
    def _container(self) -> dict[str, Any]:
        return self._spec["containers"][-1]

    def name(self, name: str) -> PodBuilder:
        self._pod["metadata"]["name"] = name
        return self

    def namespace(self, namespace: str) -> PodBuilder:
        self._pod["metadata"]["namespace"] = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._pod["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod["metadata"].setdefault("labels", {})[key] = value
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._pod["metadata"]["creationTimestamp"] = timestamp
        return self

    def req(self, **requests: str | int) -> PodBuilder:
        """Requests of the last container; ``ephemeral_storage`` becomes ``ephemeral-storage``."""
        resources = self._container.setdefault("resources", {}).setdefault("requests", {})
        for name, value in requests.items():
            resources[name.replace("_", "-")] = str(value)
        return self

    def res(self, requests: dict[str, str]) -> PodBuilder:
        """Requests with arbitrary resource names (``example.com/gpu``)."""
        self._container.setdefault("resources", {}).setdefault("requests", {}).update(requests)
        return self

    def limits(self, **limits: str | int) -> PodBuilder:
        resources = self._container.setdefault("resources", {}).setdefault("limits", {})
        for name, value in limits.items():
            resources[name.replace("_", "-")] = str(value)
        return self

    def container(self, image: str = "registry.k8s.io/pause:3.10", **requests: str) -> PodBuilder:
        c: dict[str, Any] = {"name": f"c{len(self._spec['containers'])}", "image": image}
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        self._spec["containers"].append(c)
        return self

    def init_container(self, sidecar: bool = False, image: str = "busybox", **requests: str) -> PodBuilder:
        c: dict[str, Any] = {"name": f"init{len(self._spec.get('initContainers', []))}", "image": image}
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        if sidecar:
            c["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(c)
        return self

    def overhead(self, **resources: str) -> PodBuilder:
        self._spec["overhead"] = {k.replace("_", "-"): v for k, v in resources.items()}
        return self

    def pod_requests(self, **requests: str) -> PodBuilder:
        """Pod-level requests (``spec.resources.requests``)."""
        resources = self._spec.setdefault("resources", {}).setdefault("requests", {})
        resources.update({k.replace("_", "-"): v for k, v in requests.items()})
        return self

    def container_status(
        self,
        name: str,
        requests: dict[str, str] | None = None,
        allocated: dict[str, str] | None = None,
        init: bool = False,
    ) -> PodBuilder:
        """A container status as the kubelet reports it after an in-place resize: ``resources.requests``
        (what is actuated; ``resources`` is set even when ``requests`` is None) and
        ``allocatedResources`` (what the kubelet admitted), both only when given."""
        status: dict[str, Any] = {"name": name, "resources": {}}
        if requests is not None:
            status["resources"]["requests"] = dict(requests)
        if allocated is not None:
            status["allocatedResources"] = dict(allocated)
        kind = "initContainerStatuses" if init else "containerStatuses"
        self._pod.setdefault("status", {}).setdefault(kind, []).append(status)
        return self

    def condition(self, type: str, reason: str = "", status: str = "True") -> PodBuilder:
        """A pod condition (``PodResizePending`` with reason ``Infeasible``, ...)."""
        entry = {"type": type, "status": status, **({"reason": reason} if reason else {})}
        self._pod.setdefault("status", {}).setdefault("conditions", []).append(entry)
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        return self

    def nominated(self, name: str) -> PodBuilder:
        self._pod.setdefault("status", {})["nominatedNodeName"] = name
        return self

    def scheduler_name(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def gate(self, name: str) -> PodBuilder:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def toleration(
        self, key: str = "", operator: str = "Equal", value: str = "", effect: str = ""
    ) -> PodBuilder:
        toleration = {
            k: v for k, v in (("key", key), ("operator", operator), ("value", value), ("effect", effect)) if v
        }
        self._spec.setdefault("tolerations", []).append(toleration)
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        entry: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            entry["hostIP"] = host_ip
        self._container.setdefault("ports", []).append(entry)
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._spec.setdefault("nodeSelector", {}).update(labels)
        return self

    def affinity(self, affinity: dict[str, Any]) -> PodBuilder:
        self._spec["affinity"] = affinity
        return self

    def spread(self, constraint: dict[str, Any]) -> PodBuilder:
        self._spec.setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def image(self, image: str) -> PodBuilder:
        self._container["image"] = image
        return self

    def set(self, path: str, value: Any) -> PodBuilder:
        """Sets any field by dotted path (``spec.preemptionPolicy``)."""
        target = self._pod
        *parents, last = path.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._pod)


class NodeBuilder:
    def __init__(self) -> None:
        self._node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "", "labels": {}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def name(self, name: str) -> NodeBuilder:
        self._node["metadata"]["name"] = name
        self._node["metadata"]["labels"].setdefault("kubernetes.io/hostname", name)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._node["metadata"]["labels"][key] = value
        return self

    def zone(self, zone: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/zone", zone)

    def capacity(self, **resources: str | int) -> NodeBuilder:
        """Sets capacity and allocatable; ``ephemeral_storage`` becomes ``ephemeral-storage``."""
        values = {k.replace("_", "-"): str(v) for k, v in resources.items()}
        self._node["status"]["capacity"] = dict(values)
        self._node["status"]["allocatable"] = dict(values)
        return self

    def allocatable(self, resources: dict[str, str]) -> NodeBuilder:
        self._node["status"]["allocatable"].update(resources)
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._node["spec"].setdefault("taints", []).append(taint)
        return self

    def unschedulable(self, value: bool = True) -> NodeBuilder:
        self._node["spec"]["unschedulable"] = value
        return self

    def images(self, images: dict[str, int]) -> NodeBuilder:
        self._node["status"]["images"] = [
            {"names": [name], "sizeBytes": size} for name, size in images.items()
        ]
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._node)


def make_pod() -> PodBuilder:
    return PodBuilder()


def make_node() -> NodeBuilder:
    return NodeBuilder()
