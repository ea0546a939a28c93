"""The default plugin set, laid out as kube-scheduler's ``getDefaultPlugins``: everything through
``multiPoint``, in run order, with upstream's score weights.

The volume plugins sit where upstream puts them, between NodeResourcesFit and PodTopologySpread:
VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone. DynamicResources sits before
DefaultPreemption, as upstream inserts it with the DynamicResourceAllocation gate on (GA in v1.34).
"""

from __future__ import annotations

from kopf_scheduler.api.profile import PluginRef, PluginSet
from kopf_scheduler.plugins import names

DEFAULT_MULTI_POINT: list[tuple[str, int]] = [
    (names.SCHEDULING_GATES, 0),
    (names.PRIORITY_SORT, 0),
    (names.NODE_UNSCHEDULABLE, 0),
    (names.NODE_NAME, 0),
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
    (names.DYNAMIC_RESOURCES, 0),
    (names.DEFAULT_PREEMPTION, 0),
    (names.NODE_RESOURCES_BALANCED_ALLOCATION, 1),
    (names.IMAGE_LOCALITY, 1),
    (names.DEFAULT_BINDER, 0),
]


def default_plugins() -> dict[str, PluginSet]:
    return {
        "multiPoint": PluginSet(enabled=[PluginRef(name, weight) for name, weight in DEFAULT_MULTI_POINT])
    }
