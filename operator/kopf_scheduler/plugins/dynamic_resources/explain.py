"""What an explanation (``simulate --explain``) adds to a node DynamicResources filtered out: the device
taints that kept a pod's pending claims from devices the node sees (``taints.rejected_by_taints``), as the
plugin sees the slices (with the DeviceTaintRules' taints when DRADeviceTaintRules is on). Nothing with
DRADeviceTaints off, for a pod without claims, or when its claims cannot be read (the filter's own
message says why)."""

from __future__ import annotations

from kopf_scheduler.framework.objects import DEVICE_CLASSES
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.dynamic_resources.claims import ClaimError, has_claims, pod_claims
from kopf_scheduler.plugins.dynamic_resources.plugin import DynamicResources
from kopf_scheduler.plugins.dynamic_resources.taints import rejected_by_taints


def device_taints(
    plugin: DynamicResources, pod: PodInfo, node_name: str, labels: dict[str, str]
) -> list[str]:
    """One line per free device of the node a taint kept from one of the pod's pending claims' requests."""
    if not plugin.device_taints or not has_claims(pod):
        return []
    manager = plugin.manager
    try:
        pending = [claim for claim in pod_claims(pod, manager) if claim.allocation is None]
    except ClaimError:
        return []
    if not pending:
        return []
    classes = {c.name: c.selectors for c in plugin.handle.objects.of(DEVICE_CLASSES).list()}
    slices = manager.resource_slices(plugin.taint_rules)
    allocated = manager.allocated_devices()
    return rejected_by_taints(classes, slices, pending, node_name, labels, manager.matcher, allocated)
