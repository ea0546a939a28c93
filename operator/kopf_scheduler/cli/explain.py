"""``kopf-scheduler explain POD``: why a pod of a live cluster is, or would be, placed where it is.

Reads the cluster (``--kubeconfig``, else $KUBECONFIG, else in-cluster, else ~/.kube/config;
``--context`` picks a kubeconfig context, whose namespace is the pod's when ``-n`` is not given, as in
kubectl) through the same loader and stores ``simulate`` uses, every kind the scheduler reads, and runs
the pod's profile over it as a dry run: the pod alone, as if it arrived now, against the bound pods (its
own binding taken out; other pending pods are not placed). Prints per node the filter verdict (plugin and
reason) or each score plugin's raw, normalised and weighted score, the node it would pick and, for a pod
that fits nowhere, the message kube-scheduler would give and the smallest changes that would help
(``simulate.hints``). Read-only: nothing is written to the cluster.

The profile is the SchedulingProfile in the cluster that serves the pod's ``schedulerName`` (else the
built-in default profile), or the one in ``--profile FILE``. As a kubectl plugin (``kubectl-kopf_scheduler``
on PATH): ``kubectl kopf-scheduler explain pod/NAME -n NS``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from kopf_scheduler.api.errors import UsageError


def add_parser(sub: Any, name: str) -> None:
    parser = sub.add_parser(
        name,
        help="explain where a pod of a live cluster would go and why (read-only dry run)",
        description="Why a pod of a live cluster is, or would be, placed where it is: its profile runs over "
        "the cluster as a dry run and shows per node the filter verdict or the scores, the node it would "
        "pick and, for a pod that fits nowhere, kube-scheduler's message and the smallest changes that "
        "would help. Read-only: nothing is written to the cluster.",
    )
    parser.add_argument("pod", metavar="POD", help="the pod: NAME, pod/NAME or pods/NAME")
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="its namespace (default: the context's namespace, else default, as kubectl)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="FILE",
        help="explain with this SchedulingProfile instead",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="default: $KUBECONFIG, else in-cluster, else ~/.kube/config",
    )
    parser.add_argument(
        "--context", default=None, help="the kubeconfig context to use (default: the current one)"
    )
    parser.add_argument(
        "--output", "-o", choices=("table", "json"), default="table", help="output format (default: table)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kopf_scheduler.simulate.live import connect_live, read_live

    kind, _, name = args.pod.rpartition("/")
    if kind not in ("", "pod", "pods", "po") or not name:
        raise UsageError(f"POD: expected NAME or pod/NAME, not {args.pod!r}")
    connection = connect_live(args.kubeconfig, args.context)
    objects = read_live(connection)
    report = explain_pod(objects, args.namespace or connection.default_namespace, name, args.profile)
    print(json.dumps(report, indent=2) if args.output == "json" else table(report))
    return 0


def explain_pod(
    objects: list[tuple[str, dict[str, Any]]], namespace: str, name: str, profile_file: Path | None
) -> dict[str, Any]:
    """The report on pod ``namespace/name`` of ``objects`` (``simulate.live.read_cluster``)."""
    from kopf_scheduler.api.errors import ProfileError
    from kopf_scheduler.api.profile import ProfileSpec, parse_profile
    from kopf_scheduler.framework.node_info import NodeInfo
    from kopf_scheduler.framework.pod_info import PodInfo
    from kopf_scheduler.simulate.hints import hints
    from kopf_scheduler.simulate.loader import load_objects, load_profiles
    from kopf_scheduler.simulate.run import simulate

    def is_pod(obj: dict[str, Any], ns: str, pod: str) -> bool:
        meta = obj.get("metadata") or {}
        return obj.get("kind") == "Pod" and meta.get("namespace") == ns and meta.get("name") == pod

    target = next((obj for _, obj in objects if is_pod(obj, namespace, name)), None)
    if target is None:
        raise UsageError(f"pod {namespace}/{name} not found")
    pod = copy.deepcopy(target)
    bound_to = pod["spec"].pop("nodeName", None)
    scheduler_name = pod["spec"].get("schedulerName") or "default-scheduler"

    if profile_file is not None:
        loaded = load_profiles([profile_file])
        if len(loaded) != 1:
            raise UsageError(f"{profile_file}: expected one SchedulingProfile, found {len(loaded)}")
        where, spec = loaded[0]
        pod["spec"]["schedulerName"] = scheduler_name = spec.scheduler_name
    else:
        where, spec = "built-in default profile", ProfileSpec(scheduler_name=scheduler_name)
        for _, obj in objects:
            if (
                obj.get("kind") != "SchedulingProfile"
                or (obj.get("spec") or {}).get("schedulerName") != scheduler_name
            ):
                continue
            try:
                where, spec = f"SchedulingProfile {obj['metadata']['name']}", parse_profile(obj)
            except ProfileError:
                continue  # refused in the cluster too: it serves nothing

    kept = [
        (where_from, obj)
        for where_from, obj in objects
        if obj.get("kind") not in ("Pod", "SchedulingProfile") or (_holds_room(obj) and obj is not target)
    ]
    cluster = load_objects([*kept, ("the pod explained", pod)])
    result = asyncio.run(simulate(cluster, [(where, spec)], explain=True))
    uid = pod["metadata"]["uid"]
    outcome = result.outcomes.get(uid)
    explanation = result.explanations.get(uid) or {}
    report: dict[str, Any] = {
        "pod": f"{namespace}/{name}",
        "schedulerName": scheduler_name,
        "profile": where,
        "boundTo": bound_to,
        "node": outcome.node if outcome is not None else None,
        "message": outcome.message if outcome is not None else None,
        "nodes": explanation.get("nodes", {}),
        "hints": [],
    }
    if uid in result.gated:
        report["message"] = result.gate_messages.get(uid, "waiting for its scheduling gates to be removed")
    if outcome is not None and outcome.nominated_node:
        report["nominatedNode"] = outcome.nominated_node
        report["victims"] = list(outcome.victims)
    if report["node"] is None and report["nodes"]:
        infos = {n["metadata"]["name"]: NodeInfo(n) for n in cluster.nodes}
        for bound in cluster.bound_pods:
            info = infos.get(bound["spec"]["nodeName"])
            if info is not None:
                info.add_pod(PodInfo(bound))
        report["hints"] = hints(PodInfo(pod), infos, report["nodes"])
    return report


def _holds_room(pod: dict[str, Any]) -> bool:
    """A pod that counts on its node: bound and not finished."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def table(report: dict[str, Any]) -> str:
    from kopf_scheduler.simulate.output import node_lines

    lines = [f"pod {report['pod']}: schedulerName {report['schedulerName']}, {report['profile']}"]
    if report["boundTo"]:
        lines.append(
            f"bound to {report['boundTo']}; placed afresh now it would go to {report['node'] or 'no node'}"
        )
    elif report["node"]:
        lines.append(f"pending; it would go to {report['node']}")
    if report["node"] is None and report["message"]:
        lines.append(f"unschedulable: {report['message']}")
    if report.get("victims"):
        lines.append(f"it would preempt {', '.join(report['victims'])} on {report['nominatedNode']}")
    if report["nodes"]:
        lines.append("")
        lines.extend(node_lines(report["nodes"]))
    if report["hints"]:
        lines.append("")
        lines.append("what would help:")
        lines.extend(f"  {hint}" for hint in report["hints"])
    return "\n".join(lines)
