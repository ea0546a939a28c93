"""A ``ClusterClient`` for scheduler tests that records what the scheduler asked of the cluster: every
binding answered as done (and never shown by a watch), every failure reported."""

from __future__ import annotations

from kopf_scheduler.framework.pod_info import PodInfo


class RecordingClient:
    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []
        #: (pod key, reason, message)
        self.failures: list[tuple[str, str, str]] = []

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        self.bound.append((pod.key, node_name))

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None: ...

    def record_failure(self, pod: PodInfo, reason: str, message: str, nominated: str | None) -> None:
        self.failures.append((pod.key, reason, message))
