"""A model-based test of the scheduler cache: random sequences of node and pod events, assumes, forgets,
finished bindings and overdue pods forgotten, checked after every step against a cache rebuilt from
scratch out of a plain model (which nodes exist, which pods are where and whether they are assumed),
and, whenever the snapshot is refreshed incrementally, against a snapshot of that rebuilt cache.

The model is a dict of node objects and a dict of pods; its only rules are the cache's contract (see
``backend/cache/cache.py``): an assigned pod seen in the API replaces whatever the cache held for its
uid, confirmed; ``assume`` refuses a uid the cache holds; only an assumed pod can be forgotten, and only
on the node it was assumed on; an assumed pod whose binding finished is overdue strictly after the TTL.
Beyond equal contents, a refreshed snapshot must give every changed node a new generation (plugins cache
per row generation) and a new labels version when labels, taints or the node set changed (plugins memoise
per labels version).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kopf_scheduler.backend.cache import Cache, CacheError, Snapshot
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

NODES = ("n0", "n1", "n2", "n3")
UIDS = ("a", "b", "c", "d", "e")
IMAGES = ("img-x:1", "img-y:1")
TTL = 30.0


@dataclass(frozen=True)
class NodeVariant:
    zone: str
    cpu: int
    tainted: bool
    image: str
    cordoned: bool
    disk: str


@dataclass(frozen=True)
class PodVariant:
    cpu: int
    memory: int
    port: int
    affinity: str


node_variants = st.builds(
    NodeVariant,
    zone=st.sampled_from(("", "za", "zb")),
    cpu=st.sampled_from((2, 4)),
    tainted=st.booleans(),
    image=st.sampled_from(("", *IMAGES)),
    cordoned=st.booleans(),
    disk=st.sampled_from(("", "ssd")),
)
pod_variants = st.builds(
    PodVariant,
    cpu=st.sampled_from((0, 100, 500)),
    memory=st.sampled_from((0, 64)),
    port=st.sampled_from((0, 8080)),
    affinity=st.sampled_from(("", "affinity", "anti")),
)
names = st.sampled_from(NODES)
uids = st.sampled_from(UIDS)


def _node(name: str, v: NodeVariant) -> dict[str, Any]:
    builder = make_node().name(name).capacity(cpu=v.cpu, memory="8Gi", pods=10)
    if v.zone:
        builder.zone(v.zone)
    if v.disk:
        builder.label("disk", v.disk)
    if v.tainted:
        builder.taint("dedicated", "x")
    if v.image:
        builder.images({v.image: 1000})
    if v.cordoned:
        builder.unschedulable()
    return builder.obj()


def _term() -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}


def _pod(uid: str, node: str, v: PodVariant) -> dict[str, Any]:
    builder = make_pod().name(f"pod-{uid}").uid(uid).node(node).label("app", "x")
    requests = {k: q for k, q in (("cpu", f"{v.cpu}m"), ("memory", f"{v.memory}Mi")) if not q.startswith("0")}
    if requests:
        builder.req(**requests)
    if v.port:
        builder.host_port(v.port)
    if v.affinity == "affinity":
        builder.affinity({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": _term()}
        ]}})  # fmt: skip
    elif v.affinity == "anti":
        builder.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term()]}})
    return builder.obj()


@dataclass
class ModelPod:
    info: PodInfo  # parsed once: the rebuilt cache gets the same objects the cache under test got
    assumed: bool
    deadline: float | None = None

    @property
    def raw(self) -> dict[str, Any]:
        return dict(self.info.raw)

    @property
    def node(self) -> str:
        return self.info.node_name


# -- what is compared ----------------------------------------------------------------------------------
def _node_view(info: NodeInfo) -> tuple[Any, ...]:
    return (
        info.name,
        {k: v for k, v in info.requested.items() if v},  # a resource back at 0 may keep its key
        info.non_zero_cpu,
        info.non_zero_memory,
        {port: n for port, n in info.used_ports.items() if n},
        sorted(info.pods),
        sorted(info.pods_with_affinity),
        sorted(info.pods_with_required_anti_affinity),
        info.labels,
        info.taints,
        info.unschedulable,
        info.allocatable,
        info.allowed_pod_number,
        info.image_sizes,
    )


def _cache_view(cache: Cache) -> dict[str, Any]:
    return {
        "dump": cache.dump(),  # every node entry (node-less ones too) and its pods, assumed ones marked
        "nodes": {name: _node_view(cache.node_info(name)) for name in cache.node_names()},  # type: ignore[arg-type]
        "pods": {p.uid: (p.node_name, p.raw, cache.is_assumed(p.uid)) for p in cache.pods()},
        "counts": (cache.pod_count(), cache.assumed_count(), cache.node_count()),
    }


def _column(snapshot: Snapshot, matrix: str, resource: str) -> list[int]:
    table = snapshot.table
    col = table.column.get(resource)
    if col is None:
        return [0] * len(snapshot)
    return [int(x) for x in getattr(table, matrix)[: len(snapshot), col]]


def _snapshot_view(snapshot: Snapshot, resources: set[str]) -> dict[str, Any]:
    table = snapshot.table
    n = len(snapshot)
    return {
        "order": [info.name for info in snapshot.node_infos],
        "nodes": [_node_view(info) for info in snapshot.node_infos],
        "index": {info.name: snapshot.index_of(info.name) for info in snapshot.node_infos},
        "allocatable": {r: _column(snapshot, "allocatable", r) for r in sorted(resources)},
        "requested": {r: _column(snapshot, "requested", r) for r in sorted(resources)},
        "non_zero": table.non_zero[:n].tolist(),
        "pod_count": table.pod_count[:n].tolist(),
        "allowed_pods": table.allowed_pods[:n].tolist(),
        "unschedulable": table.unschedulable[:n].tolist(),
        "has_taints": table.has_taints[:n].tolist(),
        "with_affinity": sorted(i.name for i in snapshot.have_pods_with_affinity()),
        "with_anti_affinity": sorted(i.name for i in snapshot.have_pods_with_required_anti_affinity()),
        "images": {image: snapshot.image_num_nodes(image) for image in IMAGES},
    }


class CacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock()
        self.cache = Cache(self.clock, assumed_ttl=TTL)
        self.snapshot = Snapshot()
        self.nodes: dict[str, dict[str, Any]] = {}
        self.variants: dict[str, NodeVariant] = {}
        self.pods: dict[str, ModelPod] = {}
        #: since the last refresh: did labels, taints or the node set change?
        self.labels_changed = True
        self.labels_version: int | None = None
        #: at the last refresh: each node's generation and contents
        self.seen: dict[str, tuple[int, tuple[Any, ...]]] = {}
        self.refresh_after = False

    def rebuilt(self, order: list[str] | None = None) -> Cache:
        """A cache built from scratch out of the model, its nodes added in ``order`` (then the rest)."""
        fresh = Cache(VirtualClock(), assumed_ttl=TTL)
        listed = [n for n in order or () if n in self.nodes]
        for name in [*listed, *(n for n in self.nodes if n not in listed)]:
            fresh.add_node(self.nodes[name])
        for pod in self.pods.values():
            (fresh.assume_pod if pod.assumed else fresh.add_pod)(pod.info)
        return fresh

    # -- nodes -----------------------------------------------------------------------------------------
    @rule(name=names, variant=node_variants, refresh=st.booleans())
    def set_node(self, name: str, variant: NodeVariant, refresh: bool = False) -> None:
        self.refresh_after = refresh
        raw = _node(name, variant)
        old, new = self.cache.update_node(raw)
        previous = self.variants.get(name)
        assert (old is None) == (previous is None)
        assert new.name == name
        if previous is None or (previous.zone, previous.disk, previous.tainted) != (
            variant.zone,
            variant.disk,
            variant.tainted,
        ):
            self.labels_changed = True
        self.nodes[name], self.variants[name] = raw, variant

    # A node changing in one respect only, so that a refresh sees that change alone.
    @precondition(lambda self: self.variants)
    @rule(data=st.data(), disk=st.sampled_from(("", "ssd")), tainted=st.booleans(), refresh=st.booleans())
    def relabel_node(self, data: st.DataObject, disk: str, tainted: bool, refresh: bool = False) -> None:
        name = data.draw(st.sampled_from(sorted(self.variants)))
        self.set_node(name, dataclasses.replace(self.variants[name], disk=disk, tainted=tainted), refresh)

    @precondition(lambda self: self.variants)
    @rule(
        data=st.data(),
        cpu=st.sampled_from((2, 4)),
        image=st.sampled_from(("", *IMAGES)),
        refresh=st.booleans(),
    )
    def resize_node(self, data: st.DataObject, cpu: int, image: str, refresh: bool = False) -> None:
        name = data.draw(st.sampled_from(sorted(self.variants)))
        self.set_node(name, dataclasses.replace(self.variants[name], cpu=cpu, image=image), refresh)

    @rule(name=names, refresh=st.booleans())
    def remove_node(self, name: str, refresh: bool = False) -> None:
        self.refresh_after = refresh
        old = self.cache.remove_node(name)
        assert (old is None) == (name not in self.nodes)
        if self.nodes.pop(name, None) is not None:
            del self.variants[name]
            self.labels_changed = True

    # -- pods as the API shows them ----------------------------------------------------------------------
    @rule(uid=uids, node=names, variant=pod_variants, refresh=st.booleans())
    def add_pod(self, uid: str, node: str, variant: PodVariant, refresh: bool = False) -> None:
        self.refresh_after = refresh
        pod = PodInfo(_pod(uid, node, variant))
        self.cache.add_pod(pod)
        self.pods[uid] = ModelPod(pod, assumed=False)

    @rule(uid=uids, node=names, variant=pod_variants, refresh=st.booleans())
    def update_pod(self, uid: str, node: str, variant: PodVariant, refresh: bool = False) -> None:
        self.refresh_after = refresh
        pod = PodInfo(_pod(uid, node, variant))
        old = self.pods.get(uid)
        self.cache.update_pod(old.info if old else None, pod)
        self.pods[uid] = ModelPod(pod, assumed=False)

    @rule(uid=uids, refresh=st.booleans())
    def remove_pod(self, uid: str, refresh: bool = False) -> None:
        self.refresh_after = refresh
        ref = PodInfo(make_pod().name(f"pod-{uid}").uid(uid).obj())
        removed = self.cache.remove_pod(ref)
        expected = self.pods.pop(uid, None)
        assert (removed.raw if removed else None) == (expected.raw if expected else None)

    # -- the scheduler's own steps -----------------------------------------------------------------------
    @rule(uid=uids, node=names, variant=pod_variants, refresh=st.booleans())
    def assume_pod(self, uid: str, node: str, variant: PodVariant, refresh: bool = False) -> None:
        """Any uid: mostly one the cache holds already, which it refuses."""
        self.refresh_after = refresh
        pod = PodInfo(_pod(uid, node, variant))
        if uid in self.pods:
            with pytest.raises(CacheError, match="is already in the cache"):
                self.cache.assume_pod(pod)
            return
        self.cache.assume_pod(pod)
        self.pods[uid] = ModelPod(pod, assumed=True)

    @precondition(lambda self: len(self.pods) < len(UIDS))
    @rule(data=st.data(), node=names, variant=pod_variants, refresh=st.booleans())
    def assume_new_pod(
        self, data: st.DataObject, node: str, variant: PodVariant, refresh: bool = False
    ) -> None:
        """The scheduler's assume: of a pod the cache does not hold."""
        uid = data.draw(st.sampled_from([uid for uid in UIDS if uid not in self.pods]))
        self.assume_pod(uid, node, variant, refresh)

    def assumed(self) -> list[str]:
        return sorted(uid for uid, pod in self.pods.items() if pod.assumed)

    @rule(uid=uids, node=names, refresh=st.booleans())
    def forget_any_pod(self, uid: str, node: str, refresh: bool = False) -> None:
        """Mostly a forget out of order: of a pod not in the cache, bound, or assumed elsewhere."""
        self.refresh_after = refresh
        known = self.pods.get(uid)
        pod = known.info.bound_to(node) if known else PodInfo(_pod(uid, node, PodVariant(100, 0, 0, "")))
        if known is not None and (not known.assumed or known.node != node):
            reason = "is bound, not assumed" if not known.assumed else f"was assumed on {known.node}"
            with pytest.raises(CacheError, match=reason):
                self.cache.forget_pod(pod)
            return
        self.cache.forget_pod(pod)
        self.pods.pop(uid, None)

    @precondition(lambda self: self.assumed())
    @rule(data=st.data(), refresh=st.booleans())
    def forget_assumed_pod(self, data: st.DataObject, refresh: bool = False) -> None:
        """The scheduler's forget: of a pod it assumed, on the node it assumed it on."""
        uid = data.draw(st.sampled_from(self.assumed()))
        self.forget_any_pod(uid, self.pods[uid].node, refresh)

    @precondition(lambda self: self.assumed())
    @rule(data=st.data(), refresh=st.booleans())
    def finish_binding(self, data: st.DataObject, refresh: bool = False) -> None:
        self.refresh_after = refresh
        known = self.pods[data.draw(st.sampled_from(self.assumed()))]
        self.cache.finish_binding(known.info)
        known.deadline = self.clock.now() + TTL  # again: a deadline counts from the last finish

    @rule(seconds=st.sampled_from((TTL / 3, TTL / 2, TTL)), refresh=st.booleans())
    def overdue(self, seconds: float, refresh: bool = False) -> None:
        """Time passes; the overdue pods are forgotten, as the binding confirmation forgets those it finds
        still unbound."""
        self.refresh_after = refresh
        self.clock.advance(seconds)
        overdue = self.cache.overdue_assumed_pods()
        now = self.clock.now()
        due = {
            uid for uid, p in self.pods.items() if p.assumed and p.deadline is not None and now > p.deadline
        }
        assert {p.uid for p in overdue} == due
        for pod in overdue:
            self.cache.forget_pod(pod)
            del self.pods[pod.uid]

    # -- snapshots -------------------------------------------------------------------------------------
    @rule()
    def refresh_snapshot(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Brings the snapshot up to date and compares it with one of a cache rebuilt from scratch."""
        self.cache.update_snapshot(self.snapshot)
        order = [info.name for info in self.snapshot.node_infos]
        fresh = Snapshot()
        self.rebuilt(order).update_snapshot(fresh)
        resources = set(self.snapshot.table.resources) | set(fresh.table.resources)
        assert _snapshot_view(self.snapshot, resources) == _snapshot_view(fresh, resources)
        for i, info in enumerate(self.snapshot.node_infos):
            assert self.snapshot.table.generation[i] == info.generation
            assert info is not self.cache.node_info(info.name)  # a clone: the cache's own never leaks
        version = self.snapshot.table.labels_version
        if self.labels_changed:
            assert version != self.labels_version, "labels, taints or nodes changed: memos must go"
        now = {info.name: (info.generation, _node_view(info)) for info in self.snapshot.node_infos}
        for name, (generation, view) in now.items():
            before = self.seen.get(name)
            if before is not None and before[1] != view:
                assert generation != before[0], f"{name} changed but kept generation {generation}"
        self.seen, self.labels_version, self.labels_changed = now, version, False

    @invariant()
    def matches_a_cache_rebuilt_from_scratch(self) -> None:
        assert _cache_view(self.cache) == _cache_view(self.rebuilt())
        for uid, pod in self.pods.items():
            assert self.cache.is_assumed(uid) is pod.assumed
        if self.refresh_after:  # half the steps refresh the snapshot right after, the others accumulate
            self.refresh_after = False
            self.refresh()


CacheMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_cache_model = CacheMachine.TestCase
