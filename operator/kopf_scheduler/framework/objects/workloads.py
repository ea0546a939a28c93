"""Namespaces, Services and the controllers that own pods (ReplicaSets, StatefulSets,
ReplicationControllers), kept as the little the scheduler reads of them.

- ``Namespace``: its labels, for ``namespaceSelector`` in pod (anti-)affinity terms. The API server labels
  every namespace ``kubernetes.io/metadata.name: <name>``; the store keeps the labels as listed.
- ``Service``: its ``spec.selector``. A missing or empty selector selects no pod (upstream's
  ``GetPodServices`` skips services with a nil selector, and the API server stores an empty map as nil).
- ``ReplicaSet`` and ``StatefulSet``: the requirements of ``spec.selector`` (a ``LabelSelector``); none
  when it is missing or invalid, as ``LabelSelectorAsSelector`` fails or yields nothing then.
- ``ReplicationController``: its ``spec.selector`` map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key, string_map
from kopf_scheduler.framework.selectors import LabelSelector, Requirement, SelectorError

_EMPTY: Mapping[str, str] = {}


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name)
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{name}: must be an object")
    return value


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str]


def parse_namespace(raw: Mapping[str, Any]) -> Namespace:
    _, name = object_key(raw, namespaced=False)
    labels = string_map(_section(raw, "metadata").get("labels"), "metadata.labels") or {}
    return Namespace(name, labels)


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    #: ``None``: selects no pod
    selector: Mapping[str, str] | None

    def selects(self, labels: Mapping[str, str]) -> bool:
        selector = self.selector
        return selector is not None and all(labels.get(k) == v for k, v in selector.items())


def parse_service(raw: Mapping[str, Any]) -> Service:
    namespace, name = object_key(raw, namespaced=True)
    selector = string_map(_section(raw, "spec").get("selector"), "spec.selector")
    return Service(namespace, name, selector or None)


@dataclass(frozen=True, slots=True)
class ReplicationController:
    namespace: str
    name: str
    selector: Mapping[str, str]


def parse_replication_controller(raw: Mapping[str, Any]) -> ReplicationController:
    namespace, name = object_key(raw, namespaced=True)
    selector = string_map(_section(raw, "spec").get("selector"), "spec.selector") or {}
    return ReplicationController(namespace, name, selector)


@dataclass(frozen=True, slots=True)
class SelectorOwner:
    """A ReplicaSet or a StatefulSet: the requirements of its label selector."""

    namespace: str
    name: str
    requirements: tuple[Requirement, ...]


def parse_selector_owner(raw: Mapping[str, Any]) -> SelectorOwner:
    namespace, name = object_key(raw, namespaced=True)
    selector = _section(raw, "spec").get("selector")
    requirements: tuple[Requirement, ...] = ()
    if isinstance(selector, Mapping):
        try:
            parsed = LabelSelector.parse(selector)
        except SelectorError:
            parsed = None  # the controller is stored; its selector adds nothing, as upstream
        if parsed is not None:
            requirements = parsed.requirements
    return SelectorOwner(namespace, name, requirements)


NAMESPACES: ObjectKind[Namespace] = ObjectKind(
    "Namespace", "", "v1", "namespaces", False, parse_namespace, Resource.NAMESPACE
)
SERVICES: ObjectKind[Service] = ObjectKind(
    "Service", "", "v1", "services", True, parse_service, Resource.SERVICE
)
REPLICATION_CONTROLLERS: ObjectKind[ReplicationController] = ObjectKind(
    "ReplicationController",
    "",
    "v1",
    "replicationcontrollers",
    True,
    parse_replication_controller,
    Resource.REPLICATION_CONTROLLER,
)
REPLICA_SETS: ObjectKind[SelectorOwner] = ObjectKind(
    "ReplicaSet", "apps", "v1", "replicasets", True, parse_selector_owner, Resource.REPLICA_SET
)
STATEFUL_SETS: ObjectKind[SelectorOwner] = ObjectKind(
    "StatefulSet", "apps", "v1", "statefulsets", True, parse_selector_owner, Resource.STATEFUL_SET
)
