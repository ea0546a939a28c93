"""A fresh placement of the pods bound today: ``simulate --fresh`` (the default with ``--from-cluster``).

The bound pods whose ``schedulerName`` the profiles serve are taken off their nodes and placed again,
with the pending pods, in queue order (priority, then creation time), under the same profiles; the other
bound pods (other schedulers', mirror pods of static pods) stay where they are as load. The answer is,
per pod bound today, whether it would land on the node it is on, elsewhere, or nowhere: how far today's
layout has drifted from what the profile would build now (after scale-downs, node additions, a new
profile), which is what a descheduler or a rollout would act on.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.scheduling.scheduler import DEFAULT_SCHEDULER_NAMES
from kopf_scheduler.simulate.loader import ClusterInput
from kopf_scheduler.simulate.run import SimulationResult

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class Replaced:
    namespace: str
    name: str
    today: str
    fresh: str | None
    #: why it would not fit (fresh is None)
    message: str | None


def served_names(profiles: Iterable[tuple[str, ProfileSpec]]) -> frozenset[str]:
    """The schedulerNames the run serves (the built-in ones without profiles, as ``simulate`` does)."""
    names = frozenset(spec.scheduler_name for _, spec in profiles)
    return names or frozenset(DEFAULT_SCHEDULER_NAMES)


def fresh_input(cluster: ClusterInput, served: frozenset[str]) -> tuple[ClusterInput, dict[str, str]]:
    """The cluster with the served bound pods pending again (nodeName and status dropped), and for each
    of them (by uid) the node it is bound to today."""
    today: dict[str, str] = {}
    staying: list[dict[str, Any]] = []
    again: list[dict[str, Any]] = []
    for pod in cluster.bound_pods:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        mirror = MIRROR_ANNOTATION in (meta.get("annotations") or {})
        if mirror or (spec.get("schedulerName") or "default-scheduler") not in served:
            staying.append(pod)
            continue
        pending = copy.deepcopy(pod)
        node = pending["spec"].pop("nodeName")
        pending["status"] = {"phase": "Pending"}
        today[meta["uid"]] = str(node)
        again.append(pending)
    return dataclasses.replace(cluster, bound_pods=staying, pending_pods=again + cluster.pending_pods), today


def compare(result: SimulationResult, today: dict[str, str]) -> list[Replaced]:
    """Today's node and the fresh one for every pod bound today, in the fresh run's pod order."""
    out = []
    for pod in result.pods:
        meta = pod["metadata"]
        where = today.get(meta["uid"])
        if where is None:
            continue
        outcome = result.outcomes.get(meta["uid"])
        node = outcome.node if outcome is not None else None
        message = None if node else (outcome.message if outcome is not None else None)
        out.append(Replaced(meta["namespace"], meta["name"], where, node, message))
    return out


def as_document(replaced: list[Replaced]) -> dict[str, Any]:
    """What ``--output json|yaml`` shows under ``fresh``: the pods that would move or not fit, and counts."""
    moved = [r for r in replaced if r.fresh is not None and r.fresh != r.today]
    unfit = [r for r in replaced if r.fresh is None]
    return {
        "pods": [
            {
                "namespace": r.namespace,
                "name": r.name,
                "today": r.today,
                "fresh": r.fresh,
                "message": r.message,
            }
            for r in moved + unfit
        ],
        "summary": {
            "pods": len(replaced),
            "same": len(replaced) - len(moved) - len(unfit),
            "moved": len(moved),
            "unschedulable": len(unfit),
        },
    }


def table(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    lines = ["", f"FRESH PLACEMENT of the {s['pods']} bound pods the profiles serve:"]
    if doc["pods"]:
        rows = [("NAMESPACE", "NAME", "TODAY", "FRESH")]
        rows += [(p["namespace"], p["name"], p["today"], p["fresh"] or "<none>") for p in doc["pods"]]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row, pod in zip(rows, [None, *doc["pods"]], strict=True):
            line = "  ".join(row[i].ljust(widths[i]) for i in range(4)).rstrip()
            if pod is not None and pod["message"]:
                line += "  " + pod["message"]
            lines.append(line)
    lines.append(f"{s['same']} stay, {s['moved']} move, {s['unschedulable']} would not fit")
    return lines
