"""Builders for PodTopologySpread tests: nodes with exact labels, pods with spread constraints, a snapshot
and a handle, and readers of the plugin's cycle state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.pod_topology_spread import Args, PodTopologySpread
from kopf_scheduler.plugins.pod_topology_spread.filtering import PreFilterState
from kopf_scheduler.plugins.pod_topology_spread.plugin import _PRE_FILTER_KEY
from kopf_scheduler.testing import make_node, make_pod

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "NoSchedule")


class Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> Snapshot:
        return self._snapshot


def node(name: str, labels: Mapping[str, str], tainted: bool = False) -> dict[str, Any]:
    """A node with exactly ``labels`` (no automatic hostname label)."""
    builder = make_node().name(name)
    if tainted:
        builder.taint(UNSCHEDULABLE_TAINT[0], effect=UNSCHEDULABLE_TAINT[1])
    obj = builder.obj()
    obj["metadata"]["labels"] = dict(labels)
    return obj


def zn(name: str, zone: str, tainted: bool = False, **extra: str) -> dict[str, Any]:
    """A node labelled ``zone`` and ``node`` (the topology keys upstream's tests use)."""
    return node(name, {"zone": zone, "node": name, **extra}, tainted)


def bound(name: str, on: str, labels: Mapping[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    """An existing pod on node ``on``; ``ns=...`` for another namespace, ``terminating=True``."""
    builder = make_pod().name(name).uid(f"uid-{name}").node(on)
    builder.namespace(kw.get("ns", "default"))
    for k, v in (labels or {}).items():
        builder.label(k, v)
    if kw.get("terminating"):
        builder.set("metadata.deletionTimestamp", "2024-01-01T00:00:00Z")
    return builder.obj()


def foo_pods(*placements: tuple[str, str]) -> list[dict[str, Any]]:
    """Existing pods labelled ``foo: ""``, given as (pod name, node name)."""
    return [bound(p, n, {"foo": ""}) for p, n in placements]


def spread(
    max_skew: int,
    key: str,
    action: str = "DoNotSchedule",
    selector: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        c["labelSelector"] = dict(selector)
    c.update(extra)
    return c


def incoming(
    *constraints: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity_in: tuple[str, list[str]] | None = None,
    affinity_not_in: tuple[str, list[str]] | None = None,
    tolerate_unschedulable: bool = False,
    ns: str = "default",
) -> PodInfo:
    builder = make_pod().name("p").uid("uid-p").namespace(ns)
    for k, v in (labels if labels is not None else {"foo": ""}).items():
        builder.label(k, v)
    for c in constraints:
        builder.spread(dict(c))
    if node_selector:
        builder.node_selector(**node_selector)
    for pair, op in ((affinity_in, "In"), (affinity_not_in, "NotIn")):
        if pair is not None:
            term = {"matchExpressions": [{"key": pair[0], "operator": op, "values": pair[1]}]}
            required = {"nodeSelectorTerms": [term]}
            builder.affinity({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})
    if tolerate_unschedulable:
        builder.toleration(key=UNSCHEDULABLE_TAINT[0], operator="Exists")
    return PodInfo(builder.obj())


def snapshot_of(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> Snapshot:
    infos = [NodeInfo(n) for n in nodes]
    by_name = {i.name: i for i in infos}
    for pod in pods:
        by_name[pod["spec"]["nodeName"]].add_pod(PodInfo(pod))
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    return snapshot


def plugin_for(snapshot: Snapshot, args: Args | None = None, **kw: Any) -> PodTopologySpread:
    return PodTopologySpread(args or Args(defaulting_type="List"), Handle(snapshot), **kw)


def pre_filter_state(state: CycleState) -> PreFilterState:
    return state.read(_PRE_FILTER_KEY)


def match_nums(state: PreFilterState) -> list[dict[str, int]]:
    """Per constraint, the domains and their matching-pod counts (upstream's ``TpValueToMatchNum``)."""
    out = []
    for s in state.spreads:
        names = {slot: value for value, slot in s.index.items()}
        out.append({names[i]: int(s.counts[i]) for i in np.flatnonzero(s.present).tolist()})
    return out


def all_rows(snapshot: Snapshot) -> np.ndarray:
    return np.arange(len(snapshot.node_infos), dtype=np.int64)
