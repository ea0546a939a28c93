"""Snapshots and a handle for plugin tests: nodes as API-shaped dicts, bound pods placed on them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


class FakeHandle:
    """What plugins use of the framework handle: the snapshot of the running cycle."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> Snapshot:
        return self._snapshot


def node_info(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = ()) -> NodeInfo:
    info = NodeInfo(node)
    for pod in pods:
        info.add_pod(PodInfo(pod))
    return info


def snapshot_of(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> Snapshot:
    """A snapshot of ``nodes`` with each pod of ``pods`` on the node its ``spec.nodeName`` names."""
    infos = [NodeInfo(n) for n in nodes]
    by_name = {i.name: i for i in infos}
    for pod in pods:
        by_name[pod["spec"]["nodeName"]].add_pod(PodInfo(pod))
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    return snapshot


def all_rows(snapshot: Snapshot) -> np.ndarray:
    return np.arange(len(snapshot.node_infos), dtype=np.int64)
