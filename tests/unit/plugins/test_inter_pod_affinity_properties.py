"""InterPodAffinity on random clusters: the indexed, vectorised forms agree with the per-node forms and
with a direct transcription of upstream's algorithm (every pod of every node looked at per incoming pod),
also after nodes change between cycles and after the add-pod extension."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from _affinity_kit import affinity, expr, node, plugin_for, pod, snapshot_of, term, weighted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code
from kopf_scheduler.plugins import inter_pod_affinity as ipa
from kopf_scheduler.plugins.inter_pod_affinity.plugin import _FILTER_KEY, _SCORE_KEY
from kopf_scheduler.plugins.inter_pod_affinity.terms import (
    StaticNamespaces,
    matches_all,
    merge_all,
    pod_terms,
)

NAMESPACES = {"ns1": {"team": "a"}, "ns2": {"team": "b"}}
LISTER = StaticNamespaces(NAMESPACES)
KEYS = ["hostname", "zone", "region", "rack"]

selectors = st.sampled_from(
    [
        {"labels": {"app": "a"}},
        {"labels": {"app": "b", "tier": "x"}},
        {"exprs": [expr("app", "In", "a", "b")]},
        {"exprs": [expr("tier", "Exists")]},
        {"exprs": [expr("app", "NotIn", "a")]},
        {"exprs": []},
    ]
)
namespace_choices = st.sampled_from(
    [{}, {"namespaces": ["ns1"]}, {"ns_selector": {"matchLabels": {"team": "a"}}}, {"ns_selector": {}}]
)


@st.composite
def terms(draw: Any) -> dict[str, Any]:
    selector = draw(selectors)
    topology = draw(st.sampled_from(KEYS))
    built = term(
        *selector.get("exprs", ()),
        topology=topology,
        labels=selector.get("labels"),
        **draw(namespace_choices),
    )
    if draw(st.integers(0, 9)) == 0:
        del built["labelSelector"]  # matches no pod
    return built


@st.composite
def affinities(draw: Any) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    few = st.lists(terms(), max_size=2)
    return affinity(
        draw(few),
        draw(few),
        [weighted(draw(st.integers(1, 10)), t) for t in draw(few)],
        [weighted(draw(st.integers(1, 10)), t) for t in draw(few)],
    )


@st.composite
def pods(draw: Any, name: str, node_count: int) -> dict[str, Any]:
    labels = draw(
        st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b", "x"]), max_size=2)
    )
    target = f"n{draw(st.integers(0, node_count - 1))}" if node_count else ""
    namespace = draw(st.sampled_from(["ns1", "ns2", "ns3"]))
    return pod(name, labels, node=target, namespace=namespace, aff=draw(affinities()))


@st.composite
def clusters(
    draw: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    count = draw(st.integers(1, 7))
    nodes = []
    for i in range(count):
        labels = {}
        if draw(st.integers(0, 7)):
            labels["hostname"] = f"n{i}"
        for key, values in (("zone", ["z1", "z2", "z3"]), ("region", ["r1", "r2"])):
            value = draw(st.sampled_from([*values, None]))
            if value is not None:
                labels[key] = value
        nodes.append(node(f"n{i}", labels))
    existing = [draw(pods(f"e{i}", count)) for i in range(draw(st.integers(0, 10)))]
    incoming = draw(pods("incoming", 0))
    extra = [draw(pods(f"x{i}", count)) for i in range(2)]
    return nodes, existing, incoming, extra


# -- upstream's algorithm, transcribed without index, arrays or caches --------------------------------
def _bump(counts: Counter[tuple[str, str]], labels: dict[str, str], key: str, delta: int) -> None:
    if key in labels:
        counts[(key, labels[key])] += delta


def reference_pre_filter(incoming: PodInfo, infos: list[NodeInfo]) -> tuple[bool, list[Counter[Any]], Any]:
    terms = pod_terms(incoming)
    affinity_terms = merge_all(terms.required_affinity, LISTER)
    anti_terms = merge_all(terms.required_anti, LISTER)
    ns_labels = LISTER.labels(incoming.namespace)
    existing: Counter[tuple[str, str]] = Counter()
    aff: Counter[tuple[str, str]] = Counter()
    anti: Counter[tuple[str, str]] = Counter()
    for info in infos:
        for other in info.pods.values():
            for t in pod_terms(other).required_anti:
                if t.matches(incoming, ns_labels):
                    _bump(existing, info.labels, t.topology_key, 1)
            if matches_all(affinity_terms, other):
                for t in affinity_terms:
                    _bump(aff, info.labels, t.topology_key, 1)
            for t in anti_terms:
                if t.matches(other, None):
                    _bump(anti, info.labels, t.topology_key, 1)
    skip = not existing and not terms.has_required
    return skip, [+existing, +aff, +anti], (affinity_terms, anti_terms, matches_all(affinity_terms, incoming))


def reference_filter(labels: dict[str, str], counts: list[Counter[Any]], extra: Any) -> Code | None:
    existing, aff, anti = counts
    affinity_terms, anti_terms, self_match = extra
    exist = True
    for t in affinity_terms:
        if t.topology_key not in labels:
            return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if aff[(t.topology_key, labels[t.topology_key])] <= 0:
            exist = False
    if not exist and not (not aff and self_match):
        return Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    if any(
        t.topology_key in labels and anti[(t.topology_key, labels[t.topology_key])] > 0 for t in anti_terms
    ):
        return Code.UNSCHEDULABLE
    if any(existing[(k, v)] > 0 for k, v in labels.items()):
        return Code.UNSCHEDULABLE
    return None


def reference_scores(incoming: PodInfo, infos: list[NodeInfo], hard_weight: int) -> list[int] | None:
    terms = pod_terms(incoming)
    ns_labels = LISTER.labels(incoming.namespace)
    pref = [(t.term.merged(LISTER), t.weight) for t in terms.preferred_affinity]
    pref += [(t.term.merged(LISTER), -t.weight) for t in terms.preferred_anti]
    sums: dict[str, Counter[str]] = {}

    def process(t: Any, weight: int, target: PodInfo, nsl: Any, labels: dict[str, str]) -> None:
        if t.matches(target, nsl) and t.topology_key in labels:
            sums.setdefault(t.topology_key, Counter())[labels[t.topology_key]] += weight

    for info in infos:
        for other in info.pods.values() if pref else info.pods_with_affinity.values():
            for t, w in pref:
                process(t, w, other, None, info.labels)
            theirs = pod_terms(other)
            if hard_weight > 0:
                for t in theirs.required_affinity:
                    process(t, hard_weight, incoming, ns_labels, info.labels)
            for wt in theirs.preferred_affinity:
                process(wt.term, wt.weight, incoming, ns_labels, info.labels)
            for wt in theirs.preferred_anti:
                process(wt.term, -wt.weight, incoming, ns_labels, info.labels)
    if not sums:
        return None
    return [sum(values[info.labels[k]] for k, values in sums.items() if k in info.labels) for info in infos]


def _check(plugin: ipa.InterPodAffinity, snapshot: Any, incoming: PodInfo, args: ipa.Args) -> None:
    infos = snapshot.node_infos
    rows = np.arange(len(infos), dtype=np.int64)
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, infos)
    skip, counts, extra = reference_pre_filter(incoming, infos)
    assert (status is not None and status.code == Code.SKIP) == skip
    if not skip:
        found = state.read(_FILTER_KEY)
        got = [found.existing_counts.as_dict(), found.affinity_counts.as_dict(), found.anti_counts.as_dict()]
        assert got == [dict(c) for c in counts]
        verdicts = [plugin.filter(state, incoming, n) for n in infos]
        assert [v.code if v else None for v in verdicts] == [
            reference_filter(n.labels, counts, extra) for n in infos
        ]
        assert plugin.filter_rows(state, incoming, snapshot.table, rows).tolist() == [
            v is None for v in verdicts
        ]
    status = plugin.pre_score(state, incoming, NodeSet(snapshot, rows))
    has_preferred = bool(pod_terms(incoming).preferred_affinity or pod_terms(incoming).preferred_anti)
    if args.ignore_preferred_terms_of_existing_pods and not has_preferred:
        assert status is not None and status.code == Code.SKIP
        return
    want = reference_scores(incoming, infos, args.hard_pod_affinity_weight)
    assert (status is not None and status.code == Code.SKIP) == (want is None)
    if want is not None:
        raw = [plugin.score(state, incoming, n) for n in infos]
        assert raw == want
        assert plugin.score_rows(state, incoming, snapshot.table, rows).tolist() == raw
        assert state.read(_SCORE_KEY) is not None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 3), st.booleans())
def test_indexed_forms_agree_with_upstream_algorithm(cluster: Any, hard_weight: int, ignore: bool) -> None:
    nodes, existing, incoming_raw, extra = cluster
    snapshot = snapshot_of(nodes, existing)
    args = ipa.Args(hard_pod_affinity_weight=hard_weight, ignore_preferred_terms_of_existing_pods=ignore)
    plugin = plugin_for(snapshot, args, namespaces=NAMESPACES)
    incoming = PodInfo(incoming_raw)
    _check(plugin, snapshot, incoming, args)
    # The next cycle: one node gained a pod and another lost one; the plugin refreshes only those rows.
    first = snapshot.get(extra[0]["spec"]["nodeName"]).clone()
    first.add_pod(PodInfo(extra[0]))
    snapshot.replace(first)
    second = snapshot.node_infos[-1].clone()
    for victim in list(second.pods.values())[:1]:
        second.remove_pod(victim)
    snapshot.replace(second)
    _check(plugin, snapshot, incoming, args)
    # The add-pod extension (a nominated pod) gives the counts a fresh pre-filter would.
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, snapshot.node_infos)
    if status is None:
        target = snapshot.get(extra[1]["spec"]["nodeName"])
        plugin.add_pod(state, incoming, PodInfo(extra[1]), target)
        grown = target.clone()
        grown.add_pod(PodInfo(extra[1]))
        infos = [grown if n.name == grown.name else n for n in snapshot.node_infos]
        _, counts, _ = reference_pre_filter(incoming, infos)
        found = state.read(_FILTER_KEY)
        got = [found.existing_counts.as_dict(), found.affinity_counts.as_dict(), found.anti_counts.as_dict()]
        assert got == [dict(c) for c in counts]


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_fresh_snapshot_gives_the_same_verdicts(cluster: Any) -> None:
    """The per-row caches of one snapshot never leak into another (a rebuilt table starts afresh)."""
    nodes, existing, incoming_raw, _ = cluster
    args = ipa.Args()
    plugin = plugin_for(snapshot_of(nodes, existing), args, namespaces=NAMESPACES)
    _check(plugin, plugin.handle.snapshot(), PodInfo(incoming_raw), args)
    other = snapshot_of(list(reversed(nodes)), existing[: len(existing) // 2])
    plugin.handle._snapshot = other
    _check(plugin, other, PodInfo(incoming_raw), args)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 3), st.randoms(use_true_random=False))
def test_nodes_that_come_and_go_leave_the_others_counted_right(
    cluster: Any, hard_weight: int, rng: Any
) -> None:
    """The snapshot's rows move when a node goes and another comes (the table rebuilt in place): what the
    plugin keeps per row follows its node, and the verdicts and scores stay upstream's."""
    nodes, existing, incoming_raw, extra = cluster
    snapshot = snapshot_of(nodes, existing)
    args = ipa.Args(hard_pod_affinity_weight=hard_weight)
    plugin = plugin_for(snapshot, args, namespaces=NAMESPACES)
    incoming = PodInfo(incoming_raw)
    _check(plugin, snapshot, incoming, args)
    table = snapshot.table
    infos = list(snapshot.node_infos)
    gone = infos.pop(rng.randrange(len(infos)))
    came = NodeInfo({**gone.node, "metadata": {**gone.node["metadata"], "name": "came"}})
    came.add_pod(PodInfo({**extra[0], "spec": {**extra[0]["spec"], "nodeName": "came"}}))
    infos.insert(rng.randrange(len(infos) + 1), came)
    rng.shuffle(infos)
    snapshot.rebuild(infos)
    assert snapshot.table is table
    _check(plugin, snapshot, incoming, args)
    snapshot.rebuild(infos[1:])  # one node fewer, none new
    _check(plugin, snapshot, incoming, args)
