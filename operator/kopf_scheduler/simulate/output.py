"""Renders a simulation: a table for people, JSON or YAML for programs.

JSON: ``{"pods": [{"namespace", "name", "node", "message"}, ...], "summary": {...}}``, the summary counting
the cluster's ``nodes``, the ``nodesUsed`` the scheduled pods went onto, the ``pods``, those ``scheduled``
and ``unschedulable``; a pod nominated by
preemption also carries ``"nominatedNode"`` and the ``"victims"`` it preempted (``namespace/name``); a pod
of the input preempted after it was scheduled carries ``"preemptedBy"``; with explain, each pod also
carries ``"nodes": {name: {"filter", "scores", "total"}}``, and a pod that got PodTopologySpread's default
constraints ``"defaultSpreading": {"constraints", "selector", "from"}``. A pod with volumes that use
claims carries ``"volumes": [{"name", "claim", "persistentVolume", "binding"}]``: the volume each claim is
bound to after the run, and ``"binding"`` ``bound`` (before the run), ``static`` (to an existing volume)
or ``provisioned`` (made for it on the pod's node). A pod with ResourceClaims carries
``"resourceClaims": [{"name", "claim", "devices": [{"request", "driver", "pool", "device"}]}]``: the claim
each entry uses and the devices allocated to it after the run (a share of a device that allows multiple
allocations with its ``shareID`` and ``consumedCapacity``); the claim the scheduler made for the pod's
extended resources backed by DRA comes last, named ``<extended-resources>``. A pod of a gang
(``scheduling.x-k8s.io/pod-group``) carries ``"podGroup"``, and the document ``"gangs": [{"namespace",
"name", "minMember", "pods", "placed", "scheduled", "message"}]`` (``simulate.gangs``), present when the
input has gangs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS
from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL
from kopf_scheduler.simulate.dra import claim_entries
from kopf_scheduler.simulate.fresh import Replaced
from kopf_scheduler.simulate.fresh import as_document as fresh_document
from kopf_scheduler.simulate.fresh import table as fresh_table
from kopf_scheduler.simulate.gangs import gang_entries, gang_table
from kopf_scheduler.simulate.run import SimulationResult
from kopf_scheduler.simulate.volumes import SimulatedVolumes

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
            message = result.gate_messages.get(uid, GATED_MESSAGE)
        else:
            message = None if node else (outcome.message if outcome is not None else None)
        entry: dict[str, Any] = {
            "namespace": meta["namespace"],
            "name": meta["name"],
            "node": node,
            "message": message,
        }
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if group:
            entry["podGroup"] = group
        if outcome is not None and outcome.nominated_node and (not node or outcome.victims):
            entry["nominatedNode"] = outcome.nominated_node
        if outcome is not None and outcome.victims:
            entry["victims"] = list(outcome.victims)
        if outcome is not None and outcome.preempted_by:
            entry["preemptedBy"] = outcome.preempted_by
        volumes = pod_volumes(result.volumes, pod)
        if volumes:
            entry["volumes"] = volumes
        claims = claim_entries(result.claims, pod)
        if claims:
            entry["resourceClaims"] = claims
        if explain:
            explained = result.explanations.get(uid, {})
            entry["nodes"] = explained.get("nodes", {})
            if "defaultSpreading" in explained:
                entry["defaultSpreading"] = explained["defaultSpreading"]
        scheduled += node is not None
        pods.append(entry)
    summary = {
        "nodes": result.nodes,
        "nodesUsed": len({entry["node"] for entry in pods if entry["node"] is not None}),
        "pods": len(pods),
        "scheduled": scheduled,
        "unschedulable": len(pods) - scheduled,
        "seconds": round(result.seconds, 3),
        "podsPerSecond": round(len(pods) / result.seconds, 1) if result.seconds > 0 else None,
    }
    doc: dict[str, Any] = {"pods": pods, "summary": summary}
    gangs = gang_entries(result.pods, pods, result.pod_groups)
    if gangs:
        doc["gangs"] = gangs
        summary["gangs"] = len(gangs)
        summary["gangsScheduled"] = sum(1 for g in gangs if g["scheduled"])
    return doc


def pod_volumes(volumes: SimulatedVolumes, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per volume of the pod that uses a claim: the claim, the PersistentVolume it is bound to (None:
    none) and how it got it: ``bound`` (before the run), ``static`` (the run bound it to an existing
    volume) or ``provisioned`` (a volume made for it on the pod's node); None when unbound."""
    meta = pod["metadata"]
    found = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            claim_name = str(volume["persistentVolumeClaim"].get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            claim_name = f"{meta['name']}-{volume.get('name')}"
        else:
            continue
        claim = volumes.get(PERSISTENT_VOLUME_CLAIMS, meta["namespace"], claim_name) or {}
        bound_to = (claim.get("spec") or {}).get("volumeName") or None
        how = volumes.bound_by_run.get(bound_to, "bound") if bound_to else None
        found.append(
            {"name": volume.get("name"), "claim": claim_name, "persistentVolume": bound_to, "binding": how}
        )
    return found


def render(result: SimulationResult, fmt: str, explain: bool, fresh: list[Replaced] | None = None) -> str:
    """The run as ``fmt``; with ``fresh`` (``simulate --fresh``), the fresh placement of the bound pods
    after it (``fresh`` in JSON and YAML)."""
    doc = as_document(result, explain)
    if fresh is not None:
        doc["fresh"] = fresh_document(fresh)
    if fmt == "json":
        return json.dumps(doc, indent=2)
    if fmt == "yaml":
        return yaml.safe_dump(doc, sort_keys=False)
    text = _table(doc, explain)
    return text if fresh is None else "\n".join([text, *fresh_table(doc["fresh"])])


def node_lines(nodes: Mapping[str, Any]) -> list[str]:
    """One line per node of an explanation: its filter verdict, or its total and scores."""
    lines = []
    for name, node in nodes.items():
        verdict = node["filter"]
        if verdict is not None:
            # a filter extender's verdict names no plugin (as upstream)
            by = f" by {verdict['plugin']}" if verdict["plugin"] else ""
            lines.append(f"{name}: filtered out{by}: {verdict['reason']}")
            lines.extend(f"  {taint}" for taint in verdict.get("deviceTaints", ()))
        elif node.get("examined") is False:
            lines.append(f"{name}: not examined")
        else:
            scores = ", ".join(
                f"{plugin} {s['normalized']} (weighted {s['weighted']})"
                for plugin, s in node["scores"].items()
            )
            total = node["total"]
            lines.append(
                f"{name}: total {total if total is not None else '-'}" + (f" ({scores})" if scores else "")
            )
    return lines


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
            for claim in pod.get("resourceClaims", ()):
                devices = ", ".join(
                    f"{d['driver']}/{d['pool']}/{d['device']} ({d['request']})" for d in claim["devices"]
                )
                if claim["claim"] is None:
                    lines.append(f"  claim {claim['name']}: not created")
                else:
                    lines.append(f"  claim {claim['name']}: {claim['claim']} -> {devices or 'not allocated'}")
            for volume in pod.get("volumes", ()):
                where = volume["persistentVolume"]
                lines.append(
                    f"  volume {volume['name']}: claim {volume['claim']} -> "
                    + (f"{where} ({volume['binding']})" if where else "not bound")
                )
            lines.extend(f"  {line}" for line in node_lines(pod["nodes"]))
    if doc.get("gangs"):
        lines.append("")
        lines.extend(gang_table(doc["gangs"]))
    s = doc["summary"]
    lines.append("")
    lines.append(
        f"{s['scheduled']}/{s['pods']} pods scheduled onto {s['nodesUsed']} of {s['nodes']} nodes "
        f"in {s['seconds']}s" + (f" ({s['podsPerSecond']} pods/s)" if s["podsPerSecond"] else "")
    )
    if "gangs" in s:
        lines.append(f"{s['gangsScheduled']}/{s['gangs']} gangs placed whole")
    return "\n".join(lines)
