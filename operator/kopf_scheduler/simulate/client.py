"""The in-memory cluster ``simulate`` schedules against: a binder that records the binding and echoes
the bound pod back into the scheduler the way a watch would, and a recorder of events."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo


@dataclass
class PodOutcome:
    node: str | None = None
    message: str | None = None
    reason: str | None = None
    nominated_node: str | None = None
    attempts: int = 0


@dataclass
class SimulatedCluster:
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> pod object
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)  # uid -> outcome
    #: called with (old, new) pod objects when a binding lands (the scheduler's watch)
    on_update: Callable[[Mapping[str, Any], Mapping[str, Any]], None] | None = None
    bindings: list[tuple[str, str]] = field(default_factory=list)

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        old = self.pods.get(pod.uid)
        if old is None:
            raise APIError(404, f'pods "{pod.name}" not found')
        if (old.get("spec") or {}).get("nodeName"):
            raise APIError(409, f'pod {pod.name} is already assigned to node "{old["spec"]["nodeName"]}"')
        new = copy.copy(old)
        new["spec"] = dict(old.get("spec") or {}, nodeName=node_name)
        self.pods[pod.uid] = new
        self.bindings.append((pod.key, node_name))
        outcome = self.outcomes.setdefault(pod.uid, PodOutcome())
        outcome.node, outcome.message, outcome.reason = node_name, None, None
        if self.on_update is not None:
            self.on_update(old, new)

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        return None  # the binding itself is the record

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        outcome = self.outcomes.setdefault(pod.uid, PodOutcome())
        outcome.message, outcome.reason = message, reason
        outcome.attempts += 1
        if nominated_node_name is not None:
            outcome.nominated_node = nominated_node_name or None
