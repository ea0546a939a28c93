"""What the runtime offers to plugins (upstream's ``framework.Handle``)."""

from __future__ import annotations

from typing import Protocol

from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.interface import SnapshotLister
from kopf_scheduler.framework.pod_info import PodInfo


class WaitingPod(Protocol):
    pod: PodInfo

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...

    def pending_plugins(self) -> list[str]: ...


class WaitingPods(Protocol):
    def get(self, uid: str) -> WaitingPod | None: ...

    def all(self) -> list[WaitingPod]: ...


class PodNominator(Protocol):
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...


class Handle(Protocol):
    profile_name: str
    client: ClusterClient

    def snapshot(self) -> SnapshotLister: ...

    @property
    def waiting_pods(self) -> WaitingPods: ...

    @property
    def nominator(self) -> PodNominator: ...
