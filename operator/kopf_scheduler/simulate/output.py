"""Renders a simulation: a table for people, JSON or YAML for programs.

JSON: ``{"pods": [{"namespace", "name", "node", "message"}, ...], "summary": {...}}``; a pod nominated by
preemption also carries ``"nominatedNode"`` and the ``"victims"`` it preempted (``namespace/name``); a pod
of the input preempted after it was scheduled carries ``"preemptedBy"``; with explain, each pod also
carries ``"nodes": {name: {"filter", "scores", "total"}}``, and a pod that got PodTopologySpread's default
constraints ``"defaultSpreading": {"constraints", "selector", "from"}``.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kopf_scheduler.simulate.run import SimulationResult

#: the PodScheduled condition message the API server sets on a pod with scheduling gates
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def as_document(result: SimulationResult, explain: bool) -> dict[str, Any]:
    pods = []
    scheduled = 0
    for pod in result.pods:
        meta = pod["metadata"]
        uid = meta["uid"]
        outcome = result.outcomes.get(uid)
        node = outcome.node if outcome is not None else None
        if uid in result.unserved:
            message: str | None = f"no profile serves schedulerName {result.unserved[uid]!r}"
        elif uid in result.gated:
            message = GATED_MESSAGE
        else:
            message = None if node else (outcome.message if outcome is not None else None)
        entry: dict[str, Any] = {
            "namespace": meta["namespace"],
            "name": meta["name"],
            "node": node,
            "message": message,
        }
        if outcome is not None and outcome.nominated_node and (not node or outcome.victims):
            entry["nominatedNode"] = outcome.nominated_node
        if outcome is not None and outcome.victims:
            entry["victims"] = list(outcome.victims)
        if outcome is not None and outcome.preempted_by:
            entry["preemptedBy"] = outcome.preempted_by
        if explain:
            explained = result.explanations.get(uid, {})
            entry["nodes"] = explained.get("nodes", {})
            if "defaultSpreading" in explained:
                entry["defaultSpreading"] = explained["defaultSpreading"]
        scheduled += node is not None
        pods.append(entry)
    summary = {
        "nodes": result.nodes,
        "pods": len(pods),
        "scheduled": scheduled,
        "unschedulable": len(pods) - scheduled,
        "seconds": round(result.seconds, 3),
        "podsPerSecond": round(len(pods) / result.seconds, 1) if result.seconds > 0 else None,
    }
    return {"pods": pods, "summary": summary}


def render(result: SimulationResult, fmt: str, explain: bool) -> str:
    doc = as_document(result, explain)
    if fmt == "json":
        return json.dumps(doc, indent=2)
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    return _table(doc, explain)


def _table(doc: dict[str, Any], explain: bool) -> str:
    rows = [("NAMESPACE", "NAME", "NODE", "MESSAGE")]
    for pod in doc["pods"]:
        message = pod["message"] or ""
        if pod.get("victims") and pod["node"]:
            message = "preempted " + ", ".join(pod["victims"])
        rows.append((pod["namespace"], pod["name"], pod["node"] or "<none>", message))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    if explain:
        for pod in doc["pods"]:
            lines.append("")
            lines.append(f"{pod['namespace']}/{pod['name']} -> {pod['node'] or 'unschedulable'}")
            defaults = pod.get("defaultSpreading")
            if defaults:
                spread = "; ".join(
                    f"{c['topologyKey']} maxSkew {c['maxSkew']} {c['whenUnsatisfiable']}"
                    for c in defaults["constraints"]
                )
                lines.append(
                    f"  default spreading ({spread}) over pods matching {defaults['selector']}"
                    f" from {', '.join(defaults['from'])}"
                )
            for name, node in pod["nodes"].items():
                verdict = node["filter"]
                if verdict is not None:
                    # a filter extender's verdict names no plugin (as upstream)
                    by = f" by {verdict['plugin']}" if verdict["plugin"] else ""
                    lines.append(f"  {name}: filtered out{by}: {verdict['reason']}")
                elif node.get("examined") is False:
                    lines.append(f"  {name}: not examined")
                else:
                    scores = ", ".join(
                        f"{plugin} {s['normalized']} (weighted {s['weighted']})"
                        for plugin, s in node["scores"].items()
                    )
                    total = node["total"]
                    lines.append(
                        f"  {name}: total {total if total is not None else '-'}"
                        + (f" ({scores})" if scores else "")
                    )
    s = doc["summary"]
    lines.append("")
    lines.append(
        f"{s['scheduled']}/{s['pods']} pods scheduled onto {s['nodes']} nodes in {s['seconds']}s"
        + (f" ({s['podsPerSecond']} pods/s)" if s["podsPerSecond"] else "")
    )
    return "\n".join(lines)
