"""The ``PodScheduled`` condition and ``nominatedNodeName``, computed as upstream's ``updatePod`` does.

``update_pod_condition`` is ``podutil.UpdatePodCondition``: a new condition is appended; an existing one
is replaced, keeping its ``lastTransitionTime`` when the status did not change; it reports whether
anything but that time changed (status, reason, message, lastProbeTime). ``status_patch`` is
``updatePod`` + ``PatchPodStatus``: None when neither the condition nor the nominated node changes,
else a strategic-merge patch of ``status`` (the API server merges ``conditions`` by ``type``, so the
patch carries only the condition it sets).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

POD_SCHEDULED = "PodScheduled"
_COMPARED = ("status", "reason", "message", "lastProbeTime")


def find_condition(conditions: Any, condition_type: str) -> tuple[int, Mapping[str, Any] | None]:
    for i, condition in enumerate(conditions or ()):
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return i, condition
    return -1, None


def update_pod_condition(status: dict[str, Any], condition: dict[str, Any], now: str) -> bool:
    """Set ``condition`` in ``status["conditions"]`` (mutating both); True if it changed."""
    condition["lastTransitionTime"] = now
    conditions = status.setdefault("conditions", [])
    index, old = find_condition(conditions, condition["type"])
    if old is None:
        conditions.append(condition)
        return True
    if condition.get("status") == old.get("status"):
        condition["lastTransitionTime"] = old.get("lastTransitionTime")
    equal = all(condition.get(k) == old.get(k) for k in _COMPARED)
    conditions[index] = condition
    return not equal


def pod_scheduled_false(reason: str, message: str, generation: int | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": reason,
        "message": message,
    }
    if generation:
        # PodObservedGenerationTracking (beta and on at 1.34, GA and locked on since 1.35): an API server
        # with the gate off drops it
        condition["observedGeneration"] = generation
    return condition


def status_patch(
    old_status: Mapping[str, Any],
    condition: Mapping[str, Any] | None,
    nominated_node_name: str | None,
    now: str,
) -> dict[str, Any] | None:
    """The patch that moves ``old_status`` to carry ``condition`` and (unless None) the nominated node
    ('' clears it); None when it already does."""
    new_status = copy.deepcopy(dict(old_status))
    status: dict[str, Any] = {}
    if condition is not None:
        new_condition = dict(condition)
        if update_pod_condition(new_status, new_condition, now):
            status["conditions"] = [{k: v for k, v in new_condition.items() if v is not None}]
    if nominated_node_name is not None and (old_status.get("nominatedNodeName") or "") != nominated_node_name:
        # null deletes the field in a merge patch: an empty nominated node name is no nominated node
        status["nominatedNodeName"] = nominated_node_name or None
    return {"status": status} if status else None


def merge_patches(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """One patch with the effect of ``older`` then ``newer`` (both from ``status_patch``)."""
    status = dict(older.get("status") or {})
    for key, value in (newer.get("status") or {}).items():
        if key == "conditions":
            by_type = {c["type"]: c for c in status.get("conditions") or ()}
            by_type.update({c["type"]: c for c in value})
            status["conditions"] = list(by_type.values())
        else:
            status[key] = value
    return {"status": status}
