"""The default plugin set, laid out as kube-scheduler v1.37's ``getDefaultPlugins``: everything through
``multiPoint``, in run order, with upstream's score weights.

NodeName runs before NodeUnschedulable. The volume plugins sit where upstream puts them, between
NodeResourcesFit and PodTopologySpread: VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone.
DynamicResources, weight 2, sits before DefaultPreemption, where upstream's ``applyFeatureGates`` inserts
it with DynamicResourceAllocation on (GA; kopf-scheduler behaves as on whatever its value).
NodeDeclaredFeatures is appended when its gate is on in ``gates`` (on from 1.36), as upstream appends it, and
then GangScheduling when GenericWorkload is on (off by default). The gates of upstream's other additions
(DeferredPodScheduling, TopologyPlacementGenerator, PodGroupPodsCount) are off by default and not
implemented, so their plugins never join.
"""

from __future__ import annotations

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.api.profile import PluginRef, PluginSet
from kopf_scheduler.plugins import names

#: the default ``multiPoint`` plugins whatever the gates: (name, weight; 0 = unset)
BASE_MULTI_POINT: list[tuple[str, int]] = [
    (names.SCHEDULING_GATES, 0),
    (names.PRIORITY_SORT, 0),
    (names.NODE_NAME, 0),
    (names.NODE_UNSCHEDULABLE, 0),
    (names.TAINT_TOLERATION, 3),
    (names.NODE_AFFINITY, 2),
    (names.NODE_PORTS, 0),
    (names.NODE_RESOURCES_FIT, 1),
    (names.VOLUME_RESTRICTIONS, 0),
    (names.NODE_VOLUME_LIMITS, 0),
    (names.VOLUME_BINDING, 0),
    (names.VOLUME_ZONE, 0),
    (names.POD_TOPOLOGY_SPREAD, 2),
    (names.INTER_POD_AFFINITY, 2),
    (names.DYNAMIC_RESOURCES, 2),
    (names.DEFAULT_PREEMPTION, 0),
    (names.NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (names.IMAGE_LOCALITY, 1),
    (names.DEFAULT_BINDER, 0),
]


def default_multi_point(gates: FeatureGates = DEFAULT_GATES) -> list[tuple[str, int]]:
    """The default ``multiPoint`` plugins with ``gates`` in force."""
    plugins = list(BASE_MULTI_POINT)
    if gates.enabled("NodeDeclaredFeatures"):
        plugins.append((names.NODE_DECLARED_FEATURES, 0))
    if gates.enabled("GenericWorkload"):
        plugins.append((names.GANG_SCHEDULING, 0))
    return plugins


def default_plugins(gates: FeatureGates = DEFAULT_GATES) -> dict[str, PluginSet]:
    return {
        "multiPoint": PluginSet(
            enabled=[PluginRef(name, weight) for name, weight in default_multi_point(gates)]
        )
    }
