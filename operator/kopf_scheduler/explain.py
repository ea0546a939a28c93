"""Explanations of scheduling decisions (``simulate --explain``): for every node, the filter verdict
(plugin and reason) and each score plugin's raw, normalised and weighted score.

Built only when asked for; nothing here runs on the normal path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kopf_scheduler.framework.diagnosis import Diagnosis, FitError
from kopf_scheduler.framework.pod_info import PodInfo

if TYPE_CHECKING:
    from kopf_scheduler.schedule_one import ScheduleResult
    from kopf_scheduler.scheduler import Scheduler


def _verdicts(sched: Scheduler, diagnosis: Diagnosis | None) -> dict[str, dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    statuses = diagnosis.node_statuses if diagnosis is not None else None
    known = dict(statuses.items()) if statuses is not None else {}
    absent = diagnosis.absent_status if diagnosis is not None else None
    for info in sched.snapshot.node_infos:
        status = known.get(info.name) or absent
        entry: dict[str, Any] = {"filter": None, "scores": {}, "total": None}
        if status is not None:
            entry["filter"] = {"plugin": status.plugin, "reason": status.message()}
        elif statuses is not None and info.name not in known:
            entry["examined"] = False
        nodes[info.name] = entry
    return nodes


def explain_success(sched: Scheduler, pod: PodInfo, result: ScheduleResult) -> dict[str, Any]:
    nodes = _verdicts(sched, result.diagnosis)
    if result.rows is not None and result.totals is not None:
        infos = sched.snapshot.node_infos
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
    return nodes


def explain_failure(sched: Scheduler, pod: PodInfo, fit_error: FitError) -> dict[str, Any]:
    return _verdicts(sched, fit_error.diagnosis)


__all__ = ["explain_failure", "explain_success"]
