"""For a pod that fits nowhere: the smallest change that would help, where it can be computed.

- Resources (NodeResourcesFit's ``Insufficient <resource>``): how much the pod asks beyond what each
  node has free, and the nodes closest to fitting: ``needs 200m more cpu free on a node: closest nodes
  n3 (-200m), n7 (-1)`` (it would fit n3 if it asked 200m less, or if 200m more were free there).
- Taints (TaintToleration): each untolerated NoSchedule/NoExecute taint and how many of the nodes it
  kept the pod off: ``tolerate taint gpu=true:NoSchedule: 4 nodes``.

Computed from the nodes and the pods on them as the scheduler counts them (``NodeInfo``), not from
the messages' words.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.resources import CPU
from kopf_scheduler.framework.taints import Taint, tolerated

#: closest nodes named per resource
CLOSEST = 3
_EFFECTS = ("NoSchedule", "NoExecute")


def _amount(resource: str, value: int) -> str:
    if resource == CPU:  # as a quantity is written: whole cores plainly, else millicores
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == "memory" or resource.startswith(("hugepages-", "ephemeral-storage")):
        return f"{math.ceil(value / 2**20)}Mi"
    return str(value)


def hints(
    pod: PodInfo, nodes: Mapping[str, NodeInfo], verdicts: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """``verdicts``: the explanation's ``nodes`` (name -> {"filter": {"plugin", "reason"} | None, ...})."""
    short: dict[str, list[tuple[int, str]]] = {}
    taints: Counter[Taint] = Counter()
    for name, verdict in verdicts.items():
        rejected = verdict.get("filter")
        info = nodes.get(name)
        if not rejected or info is None:
            continue
        if rejected.get("plugin") == "NodeResourcesFit":
            for resource, wanted in pod.spec_requests.items():
                free = info.allocatable.get(resource, 0) - info.requested.get(resource, 0)
                if wanted > free:
                    short.setdefault(resource, []).append((wanted - free, name))
        elif rejected.get("plugin") == "TaintToleration":
            for taint in info.taints:
                if taint.effect in _EFFECTS and not tolerated(taint, pod.tolerations):
                    taints[taint] += 1
    lines = []
    for resource, gaps in sorted(short.items()):
        gaps.sort()
        closest = ", ".join(f"{node} (-{_amount(resource, gap)})" for gap, node in gaps[:CLOSEST])
        lines.append(
            f"needs {_amount(resource, gaps[0][0])} more {resource} free on a node: closest nodes {closest}"
        )
    for taint, count in sorted(taints.items(), key=lambda tc: (-tc[1], str(tc[0]))):
        lines.append(f"tolerate taint {taint}: {count} node{'s' if count != 1 else ''}")
    return lines
