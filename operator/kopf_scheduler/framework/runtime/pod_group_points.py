"""The pod group scheduling cycle's extension points of a framework (kube-scheduler v1.37.2's
``RunPlacementFeasiblePlugins`` and ``RunPodGroupPostFilterPlugins``), and which plugins a profile has there.

With GenericWorkload on, GangScheduling is the only PlacementFeasible plugin (when the profile has it), and
the PodGroupPostFilter plugins are the profile's plugins implementing that point, from its multiPoint set
(DefaultPreemption). With the gate off a framework has none, and no pod group cycle runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kopf_scheduler.api.profile import PluginSet
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import (
    PlacementFeasiblePlugin,
    Plugin,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.status import Code, Status, error

GANG_SCHEDULING = "GangScheduling"
GENERIC_WORKLOAD = "GenericWorkload"


def placement_feasible_plugins(
    instances: Mapping[str, Plugin], generic_workload: bool
) -> list[PlacementFeasiblePlugin]:
    """GangScheduling, when the gate is on and the profile has it (``frameworkImpl`` at construction)."""
    plugin = instances.get(GANG_SCHEDULING)
    if not generic_workload or not isinstance(plugin, PlacementFeasiblePlugin):
        return []
    return [plugin]


def pod_group_post_filter_plugins(
    instances: Mapping[str, Plugin], multi_point: PluginSet, point: PluginSet | None
) -> list[PodGroupPostFilterPlugin]:
    """The multiPoint plugins implementing PodGroupPostFilter, in multiPoint order, less those the
    profile's ``podGroupPostFilter`` set disables (a profile may only disable there)."""
    disabled = set() if point is None else set(point.disabled_names)
    if "*" in disabled:
        return []
    chosen: list[PodGroupPostFilterPlugin] = []
    for ref in multi_point.enabled:
        plugin = instances.get(ref.name)
        if isinstance(plugin, PodGroupPostFilterPlugin) and ref.name not in disabled and plugin not in chosen:
            chosen.append(plugin)
    return chosen


def run_placement_feasible(
    fwk: Framework, group: WorkloadPodGroup, scheduled: int, remaining: int
) -> Status | None:
    """Every PlacementFeasible plugin: the first Unschedulable (or error) ends it; else the last Wait."""
    status: Status | None = None
    for plugin in fwk.placement_feasible:
        try:
            result = plugin.placement_feasible(group, scheduled, remaining)
        except Exception as e:
            return error(f"running PlacementFeasible plugin: {e}", plugin=plugin.name, cause=e)
        if result is None or result.is_success:
            continue
        if result.code == Code.WAIT:
            status = result.with_plugin(plugin.name)
            continue
        if result.code == Code.UNSCHEDULABLE:
            return result.with_plugin(plugin.name)
        if result.code == Code.ERROR:
            return error(f"running PlacementFeasible plugin: {result.message()}", plugin=plugin.name)
        return error(
            f"unexpected status from PlacementFeasible plugin: {result.code.label}", plugin=plugin.name
        )
    return status


async def run_pod_group_post_filter(
    fwk: Framework,
    group: WorkloadPodGroup,
    unscheduled: Sequence[PodInfo],
    states: Mapping[str, CycleState],
    schedule: PodGroupSchedulingFunc,
) -> tuple[PodGroupPostFilterResult | None, Status]:
    """Every PodGroupPostFilter plugin until one succeeds (its result) or rules the group out
    (UnschedulableAndUnresolvable); the Unschedulable ones' reasons add up."""
    reasons: list[str] = []
    rejector = ""
    for plugin in fwk.pod_group_post_filter:
        try:
            result, status = await plugin.pod_group_post_filter(group, unscheduled, states, schedule)
        except Exception as e:
            message = f'error in "{plugin.name}" PodGroupPostFilter plugins: {e}'
            return None, error(message, plugin=plugin.name, cause=e)
        if status is None or status.is_success:
            return result, status if status is not None else Status(Code.SUCCESS)
        if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return result, status.with_plugin(plugin.name)
        if status.code == Code.UNSCHEDULABLE:
            reasons.extend(status.reasons)
            rejector = rejector or plugin.name
            continue
        message = f'error in "{plugin.name}" PodGroupPostFilter plugins: {status.message()}'
        return None, error(message, plugin=plugin.name)
    return None, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)
