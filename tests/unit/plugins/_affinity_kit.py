"""Builders for InterPodAffinity tests: affinity terms as API-shaped dicts, pods, snapshots, a plugin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import NoObjects
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins import inter_pod_affinity as ipa
from kopf_scheduler.testing import make_node, make_pod

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
_MISSING: Any = object()

#: upstream tests' namespaces and their labels
NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}


class FakeHandle:
    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self.objects = NoObjects()

    def snapshot(self) -> Snapshot:
        return self._snapshot


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def term(
    *exprs: dict[str, Any],
    topology: str = "",
    namespaces: Sequence[str] = (),
    ns_selector: Any = _MISSING,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``PodAffinityTerm``: match expressions (and/or ``labels`` as matchLabels)."""
    selector: dict[str, Any] = {}
    if exprs:
        selector["matchExpressions"] = list(exprs)
    if labels:
        selector["matchLabels"] = dict(labels)
    out: dict[str, Any] = {"labelSelector": selector, "topologyKey": topology}
    if namespaces:
        out["namespaces"] = list(namespaces)
    if ns_selector is not _MISSING:
        out["namespaceSelector"] = ns_selector
    return out


def weighted(weight: int, affinity_term: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": affinity_term}


def affinity(
    required: Iterable[dict[str, Any]] = (),
    anti: Iterable[dict[str, Any]] = (),
    preferred: Iterable[dict[str, Any]] = (),
    preferred_anti: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, key, items in (
        ("podAffinity", REQ, required),
        ("podAntiAffinity", REQ, anti),
        ("podAffinity", PREF, preferred),
        ("podAntiAffinity", PREF, preferred_anti),
    ):
        listed = list(items)
        if listed:
            out.setdefault(group, {})[key] = listed
    return out


def pod(
    name: str = "p",
    labels: Mapping[str, str] | None = None,
    node: str = "",
    namespace: str = "default",
    aff: dict[str, Any] | None = None,
) -> dict[str, Any]:
    builder = make_pod().name(name).namespace(namespace)
    for key, value in (labels or {}).items():
        builder.label(key, value)
    if node:
        builder.node(node)
    if aff:
        builder.affinity(aff)
    return builder.obj()


def node(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    raw = make_node().name(name).obj()
    raw["metadata"]["labels"] = dict(labels)  # no implicit hostname label: upstream's test nodes have none
    return raw


def snapshot_of(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> Snapshot:
    """``nodes`` with each pod on the node its ``spec.nodeName`` names (pods of unknown nodes dropped)."""
    infos = [NodeInfo(n) for n in nodes]
    by_name = {i.name: i for i in infos}
    for raw in pods:
        target = by_name.get(raw["spec"]["nodeName"])
        if target is not None:
            target.add_pod(PodInfo(raw))
    snapshot = Snapshot()
    snapshot.rebuild(infos)
    return snapshot


def plugin_for(
    snapshot: Snapshot,
    args: ipa.Args | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> ipa.InterPodAffinity:
    plugin = ipa.new(args or ipa.Args(), FakeHandle(snapshot))
    if namespaces is not None:
        plugin.namespaces = ipa.StaticNamespaces(namespaces)
    return plugin


def all_rows(snapshot: Snapshot) -> np.ndarray:
    return np.arange(len(snapshot.node_infos), dtype=np.int64)
