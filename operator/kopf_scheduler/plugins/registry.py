"""The in-tree plugins: plugin name -> module implementing it (imported only when a profile uses it)."""

from __future__ import annotations

from kopf_scheduler.framework.runtime.registry import Registry
from kopf_scheduler.plugins import names

IN_TREE: dict[str, str] = {
    names.PRIORITY_SORT: "kopf_scheduler.plugins.priority_sort",
    names.SCHEDULING_GATES: "kopf_scheduler.plugins.scheduling_gates",
    names.NODE_NAME: "kopf_scheduler.plugins.node_name",
    names.NODE_UNSCHEDULABLE: "kopf_scheduler.plugins.node_unschedulable",
    names.NODE_RESOURCES_FIT: "kopf_scheduler.plugins.node_resources_fit",
    names.TAINT_TOLERATION: "kopf_scheduler.plugins.taint_toleration",
    names.NODE_AFFINITY: "kopf_scheduler.plugins.node_affinity",
    names.NODE_PORTS: "kopf_scheduler.plugins.node_ports",
    names.VOLUME_RESTRICTIONS: "kopf_scheduler.plugins.volume_restrictions",
    names.NODE_VOLUME_LIMITS: "kopf_scheduler.plugins.node_volume_limits",
    names.VOLUME_BINDING: "kopf_scheduler.plugins.volume_binding",
    names.VOLUME_ZONE: "kopf_scheduler.plugins.volume_zone",
    names.POD_TOPOLOGY_SPREAD: "kopf_scheduler.plugins.pod_topology_spread",
    names.INTER_POD_AFFINITY: "kopf_scheduler.plugins.inter_pod_affinity",
    names.DEFAULT_PREEMPTION: "kopf_scheduler.plugins.default_preemption",
    names.DYNAMIC_RESOURCES: "kopf_scheduler.plugins.dynamic_resources",
    names.NODE_RESOURCES_BALANCED_ALLOCATION: "kopf_scheduler.plugins.node_resources_balanced_allocation",
    names.IMAGE_LOCALITY: "kopf_scheduler.plugins.image_locality",
    names.DEFAULT_BINDER: "kopf_scheduler.plugins.default_binder",
    names.NODE_DECLARED_FEATURES: "kopf_scheduler.plugins.node_declared_features",
    names.GANG_SCHEDULING: "kopf_scheduler.plugins.gang_scheduling",
    names.COSCHEDULING: "kopf_scheduler.plugins.coscheduling",
}


def new_registry(autoload: bool | None = None) -> Registry:
    """The in-tree plugins plus, unless turned off, entry points in group ``kopf_scheduler.plugins``."""
    return Registry(IN_TREE, autoload=autoload)
