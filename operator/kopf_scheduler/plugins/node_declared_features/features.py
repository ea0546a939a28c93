"""The node features NodeDeclaredFeatures knows, and what a pod needs of them (``k8s.io/component-helpers``
v0.37.2, ``nodedeclaredfeatures``: ``features/registry.go`` ``AllFeatures``, ``framework.go`` and
``featureset.go``).

A node declares the features it has in ``status.declaredFeatures`` (sorted names). A pod requires a feature
when the feature infers it from the pod's spec, unless the scheduler's version is past the feature's
``max_version`` (then every node has it). Of the nine features of v0.37.2 three infer anything for
scheduling: ``RestartAllContainersOnContainerExits`` (a container or init container has a
``restartPolicyRules`` entry with action ``RestartAllContainers``), ``UserNamespacesHostNetworkSupport``
(``hostNetwork: true`` with ``hostUsers: false``) and ``VolumeBindMountOptions`` (a volume mount of a
container, init container or ephemeral container with ``bindMountOptions``); the others matter to pod
updates or to the kubelet only, and none has a ``max_version``.

Sets of features are ``frozenset`` of registered names (upstream's bitmap over the sorted registry). A
node's list is read as ``TryMap`` reads it: one walk over the list and the sorted registry together,
skipping names the registry does not have, so a list out of order (the API server keeps it sorted) loses
what the walk passes by, exactly as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: a version as (major, minor, patch)
Version = tuple[int, int, int]
#: the version requirements are inferred for: kube-scheduler's own (``version.Get()``, v1.37.2)
COMPONENT_VERSION: Version = (1, 37, 2)
#: ``ContainerRestartRuleActionRestartAllContainers``
RESTART_ALL_CONTAINERS = "RestartAllContainers"

#: what a feature reads of a pod: its ``spec``
Spec = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    #: whether a pod being scheduled needs a node that declares the feature (``InferForScheduling``)
    infer_for_scheduling: Callable[[Spec], bool]
    #: past this version every node has the feature, so no pod requires it (``MaxVersion``; None: never)
    max_version: Version | None = None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _maps(spec: Spec, field: str) -> list[Mapping[str, Any]]:
    return [item for item in _list(spec.get(field)) if isinstance(item, Mapping)]


def _never(spec: Spec) -> bool:
    return False


def restarts_all_containers(spec: Spec) -> bool:
    """``restartallcontainers``: a container or init container may restart all of the pod's containers."""
    return any(
        isinstance(rule, Mapping) and rule.get("action") == RESTART_ALL_CONTAINERS
        for field in ("containers", "initContainers")
        for container in _maps(spec, field)
        for rule in _list(container.get("restartPolicyRules"))
    )


def user_namespace_on_host_network(spec: Spec) -> bool:
    """``usernamespaceshostnetwork``: the host's network in a user namespace of the pod's own."""
    return spec.get("hostNetwork") is True and spec.get("hostUsers") is False


def bind_mount_options(spec: Spec) -> bool:
    """``volumebindmountoptions``: a volume mount with bind mount options."""
    return any(
        isinstance(mount, Mapping) and bool(mount.get("bindMountOptions"))
        for field in ("containers", "initContainers", "ephemeralContainers")
        for container in _maps(spec, field)
        for mount in _list(container.get("volumeMounts"))
    )


#: ``features.AllFeatures``, in its order
ALL_FEATURES: tuple[Feature, ...] = (
    Feature("RestartAllContainersOnContainerExits", restarts_all_containers),
    Feature("InPlacePodLevelResourcesVerticalScaling", _never),
    Feature("ExtendWebSocketsToKubelet", _never),
    Feature("InPlacePodVerticalScalingInitContainers", _never),
    Feature("InPlacePodVerticalScalingMemoryBackedVolumes", _never),
    Feature("UserNamespacesHostNetworkSupport", user_namespace_on_host_network),
    Feature("DRANodeAllocatableResources", _never),
    Feature("VolumeBindMountOptions", bind_mount_options),
    Feature("DRAOptionalNodeOperations", _never),
)


class FeatureRegistry:
    """``nodedeclaredfeatures.Framework``: the features, sorted by name."""

    def __init__(self, features: Iterable[Feature]) -> None:
        self.features = tuple(sorted(features, key=lambda f: f.name))
        self.names = tuple(f.name for f in self.features)

    def infer_for_scheduling(self, spec: Spec, version: Version) -> frozenset[str]:
        """``InferForPodScheduling``: the features a pod with ``spec`` requires of its node."""
        return frozenset(
            f.name
            for f in self.features
            if (f.max_version is None or version <= f.max_version) and f.infer_for_scheduling(spec)
        )

    def try_map(self, declared: Sequence[str]) -> frozenset[str]:
        """``TryMap``: the registered features of a node's (sorted) ``status.declaredFeatures``."""
        found: list[str] = []
        names = self.names
        i = j = 0
        while i < len(declared) and j < len(names):
            if declared[i] == names[j]:
                found.append(names[j])
                i += 1
                j += 1
            elif declared[i] < names[j]:
                i += 1
            else:
                j += 1
        return frozenset(found)


DEFAULT_REGISTRY = FeatureRegistry(ALL_FEATURES)


def declared_features(node: Mapping[str, Any] | None) -> list[str]:
    """A node's ``status.declaredFeatures`` (names only; anything else in the list is left out)."""
    status = node.get("status") if node is not None else None
    if not isinstance(status, Mapping):
        return []
    return [name for name in _list(status.get("declaredFeatures")) if isinstance(name, str)]
