"""Explanations of scheduling decisions (``simulate --explain``): for every node, the filter verdict
(plugin and reason; for DynamicResources, the device taints that kept the pod's claims from the node's
devices) and each score plugin's raw, normalised and weighted score; for a pod that got
PodTopologySpread's default constraints, which ones and from which Services and controllers.

Built only when asked for; nothing here runs on the normal path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopf_scheduler.framework.diagnosis import Diagnosis, FitError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.dynamic_resources import DynamicResources
from kopf_scheduler.plugins.dynamic_resources.explain import device_taints
from kopf_scheduler.plugins.names import DYNAMIC_RESOURCES, POD_TOPOLOGY_SPREAD
from kopf_scheduler.plugins.pod_topology_spread import PodTopologySpread
from kopf_scheduler.plugins.pod_topology_spread.default_selector import default_selection
from kopf_scheduler.scheduling.context import ClusterView, ScheduleResult


def _verdicts(view: ClusterView, pod: PodInfo, diagnosis: Diagnosis | None) -> dict[str, dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    framework = view.profiles.get(pod.scheduler_name)
    dra = framework.plugins.get(DYNAMIC_RESOURCES) if framework is not None else None
    statuses = diagnosis.node_statuses if diagnosis is not None else None
    known = dict(statuses.items()) if statuses is not None else {}
    absent = diagnosis.absent_status if diagnosis is not None else None
    for info in view.snapshot.node_infos:
        status = known.get(info.name) or absent
        entry: dict[str, Any] = {"filter": None, "scores": {}, "total": None}
        if status is not None:
            entry["filter"] = {"plugin": status.plugin, "reason": status.message()}
            if status.plugin == DYNAMIC_RESOURCES and isinstance(dra, DynamicResources):
                taints = device_taints(dra, pod, info.name, dict(info.labels))
                if taints:
                    entry["filter"]["deviceTaints"] = taints
        elif statuses is not None and info.name not in known:
            entry["examined"] = False
        nodes[info.name] = entry
    return nodes


def default_spreading(view: ClusterView, pod: PodInfo) -> dict[str, Any] | None:
    """The default topology spread constraints ``pod`` got under its profile, with the objects its
    selector came from; None when it has its own constraints or got none."""
    framework = view.profiles.get(pod.scheduler_name)
    plugin = framework.plugins.get(POD_TOPOLOGY_SPREAD) if framework is not None else None
    if not isinstance(plugin, PodTopologySpread) or pod.topology_spread_constraints:
        return None
    constraints = [
        {"topologyKey": c.topology_key, "maxSkew": c.max_skew, "whenUnsatisfiable": action}
        for action, found in (
            ("DoNotSchedule", plugin.hard_constraints(pod)),
            ("ScheduleAnyway", plugin.soft_constraints(pod)),
        )
        for c in found
    ]
    if not constraints:
        return None
    selection = default_selection(view.objects, pod)
    selector = selection.selector.requirements if selection.selector is not None else ()
    return {
        "constraints": constraints,
        "selector": ",".join(
            f"{r.key}={next(iter(r.values))}"
            if r.operator == "In" and len(r.values) == 1
            else f"{r.key} {r.operator} ({','.join(sorted(r.values))})".replace(" ()", "")
            for r in selector
        ),
        "from": list(selection.sources),
    }


def _with_defaults(view: ClusterView, pod: PodInfo, nodes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes}
    defaults = default_spreading(view, pod)
    if defaults is not None:
        out["defaultSpreading"] = defaults
    return out


def explain_success(view: ClusterView, pod: PodInfo, result: ScheduleResult) -> dict[str, Any]:
    """``{"nodes": {name: verdict and scores}, "defaultSpreading": {...}}`` (the latter only when the pod
    got default constraints)."""
    nodes = _verdicts(view, pod, result.diagnosis)
    if result.rows is not None and result.totals is not None:
        infos = view.snapshot.node_infos
        for i, row in enumerate(result.rows.tolist()):
            entry = nodes[infos[row].name]
            entry.pop("examined", None)
            entry["total"] = int(result.totals[i])
            if result.breakdown is not None:
                entry["scores"] = {
                    plugin: {
                        "raw": int(result.breakdown.raw[plugin][i]),
                        "normalized": int(result.breakdown.normalized[plugin][i]),
                        "weighted": int(result.breakdown.weighted[plugin][i]),
                    }
                    for plugin in result.breakdown.raw
                }
    else:
        entry = nodes[result.host]
        entry.pop("examined", None)
    return _with_defaults(view, pod, nodes)


def explain_failure(view: ClusterView, pod: PodInfo, fit_error: FitError) -> dict[str, Any]:
    return _with_defaults(view, pod, _verdicts(view, pod, fit_error.diagnosis))


#: receives each pod's explanation
Sink = Callable[[PodInfo, dict[str, Any]], None]


class Explainer:
    """Explains each decision of the cycle (``context.Explains``) from the scheduler's view at that
    moment, and hands the explanation to ``sink``."""

    def __init__(self, view: ClusterView, sink: Sink) -> None:
        self.view = view
        self.sink = sink

    def success(self, pod: PodInfo, result: ScheduleResult) -> None:
        self.sink(pod, explain_success(self.view, pod, result))

    def failure(self, pod: PodInfo, fit_error: FitError) -> None:
        self.sink(pod, explain_failure(self.view, pod, fit_error))


__all__ = ["Explainer", "Sink", "default_spreading", "explain_failure", "explain_success"]
