"""Gangs in ``simulate``'s output: the pods of each PodGroup shown as one unit, placed together or not at
all, with the reason when not.

A gang is the pending pods of the input that carry the same ``scheduling.x-k8s.io/pod-group`` label in
one namespace. It is placed when at least ``minMember`` of them got a node (1 without a PodGroup). The
reason shown for a gang that was not placed is the one that explains it best: a member's own failure
(the member that fit nowhere, whose message ends with the gang's rejection), else what released the
waiting members (a Permit timeout, a rejection), else why the members were held back before any attempt
(too few of them), else the first member's message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL, PodGroup

#: messages of members released from Permit because of another member, not because of themselves
_RELEASED = ("optimistic rejection in PostFilter", "rejection in Unreserve", "rejected due to timeout")


#: how a rejection at Permit is reported: a FitError of the one node tried
_ON_ONE_NODE = "0/1 nodes are available: 1 "


def _rank(message: str) -> int:
    reason = message.removeprefix(_ON_ONE_NODE)
    if reason.startswith(_RELEASED):
        return 1 if reason.startswith("rejected due to timeout") else 2
    return 0


def gang_entries(
    pods: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]], groups: Sequence[PodGroup]
) -> list[dict[str, Any]]:
    """One entry per gang: ``{"namespace", "name", "minMember", "pods", "placed", "scheduled",
    "message"}``; ``entries`` are the pods' output entries, aligned with ``pods``."""
    known = {(g.namespace, g.name): g for g in groups}
    members: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for pod, entry in zip(pods, entries, strict=True):
        name = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL)
        if name:
            members.setdefault((entry["namespace"], str(name)), []).append(entry)
    gangs = []
    for (namespace, name), found in members.items():
        group = known.get((namespace, name))
        minimum = group.min_member if group is not None else 1
        placed = sum(1 for e in found if e["node"])
        scheduled = placed >= max(minimum, 1)
        message = None
        if not scheduled:
            messages = [e["message"] for e in found if not e["node"] and e["message"]]
            message = min(messages, key=_rank) if messages else None
        gangs.append(
            {
                "namespace": namespace,
                "name": name,
                "minMember": group.min_member if group is not None else None,
                "pods": len(found),
                "placed": placed,
                "scheduled": scheduled,
                "message": message,
            }
        )
    return gangs


def gang_table(gangs: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [("GANG", "MIN", "PLACED", "MESSAGE")]
    for gang in gangs:
        minimum = gang["minMember"]
        rows.append(
            (
                f"{gang['namespace']}/{gang['name']}",
                "-" if minimum is None else str(minimum),
                f"{gang['placed']}/{gang['pods']}",
                gang["message"] or ("" if gang["scheduled"] else "not placed"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
