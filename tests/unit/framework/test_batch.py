"""Opportunistic batching's memory (``framework/runtime/batch.py``), case by case as upstream's
``framework/runtime/batch_test.go`` at v1.37.2 has them (``TestBatchBasic``, ``TestBatchRescore``,
``TestBatchRescoreChain``), plus the metrics each case counts (``scheduler_batch_attempts_total``,
``scheduler_batch_cache_flushed_total``) and the 500 ms age limit.

As upstream's ``BatchTestPlugin``, the filter lets a node hold one pod whose uid starts with ``b``
("blocking") and any number of the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from kopf_scheduler.backend.cache import Cache, Snapshot
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.interface import (
    FilterPlugin,
    NodeSet,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.batch import OpportunisticBatch, SortedNodes
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.status import Status, error, unschedulable
from kopf_scheduler.testing import make_node, make_pod
from kopf_scheduler.testing.framework import make_framework


class BatchTestPlugin(FilterPlugin, SignPlugin):
    name = "batchTest"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if pod.uid.startswith("b") and any(uid.startswith("b") for uid in node.pods):
            return unschedulable("unsched")
        return None

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        return ()


@dataclass
class ConfigurableFilter(FilterPlugin, SignPlugin):
    filter_err: bool = False
    name: str = "configurableFilter"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return error("injected filter error") if self.filter_err else None

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        return ()


_SEEN: StateKey[set[str]] = StateKey("configurableScorePlugin/preScoreSeenNodes")


@dataclass
class ConfigurableScore(PreScorePlugin, ScorePlugin, SignPlugin):
    """Scores every node ``score``; its normalisation checks it sees only nodes pre-score saw."""

    score_value: int = 0
    pre_score_err: bool = False
    score_err: bool = False
    norm_err: bool = False
    name: str = "configurableScore"
    has_normalize: bool = True
    seen_by_normalize: list[int] = field(default_factory=list)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        if self.pre_score_err:
            return error("injected prescore error")
        state.write(_SEEN, {node.name for node in nodes})
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        if self.score_err:
            raise RuntimeError("injected score error")
        return self.score_value

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        if self.norm_err:
            return error("injected normalize error")
        seen = state.get(_SEEN)
        if seen is None:
            return error("NormalizeScore: missing PreScore state")
        if len(scores) != len(seen):
            return error("NormalizeScore called for nodes not passed to PreScore")
        self.seen_by_normalize.append(len(scores))
        return None

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        return ()


class Counted(Recorder):
    """A recorder that keeps what batching reported, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self.batch_attempt_hooks.append(lambda profile, result: self.events.append(("attempt", result)))
        self.batch_flush_hooks.append(lambda profile, reason: self.events.append(("flushed", reason)))
        self.batch_rescore_hooks.append(lambda profile: self.events.append(("rescore", profile)))


def pod(uid: str, nominated: str = "") -> PodInfo:
    builder = make_pod().name(uid).uid(uid)
    if nominated:
        builder = builder.nominated(nominated)
    return PodInfo(builder.obj())


def snapshot_of(nodes: dict[str, list[str]]) -> Snapshot:
    """Nodes by name, each with pods of the given uids."""
    clock = VirtualClock()
    cache = Cache(clock)
    for name, uids in nodes.items():
        cache.add_node(make_node().name(name).capacity(cpu="8", memory="16Gi", pods=110).obj())
        for uid in uids:
            cache.add_pod(PodInfo(make_pod().name(f"on-{uid}").uid(uid).node(name).obj()))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def nodes(*names: str) -> SortedNodes:
    """Upstream's ``newTestNodes``: in this order, no scores."""
    return SortedNodes(list(names), {}, np.zeros(len(names), dtype=np.int64))


def batch_with(
    score: ConfigurableScore | None = None, filter_: ConfigurableFilter | None = None
) -> tuple[OpportunisticBatch, VirtualClock]:
    clock = VirtualClock()
    filters: list[FilterPlugin] = [BatchTestPlugin()]
    if filter_ is not None:
        filters.append(filter_)
    scores = [score] if score is not None else []
    framework = make_framework(filter=filters, pre_score=scores, score=scores, clock=clock)
    batch = OpportunisticBatch(framework, [*filters, *scores])
    framework.batch = batch
    return batch, clock


def store(batch: OpportunisticBatch, recorder: Recorder, sig: str | None, hinted: str, chosen: str,
          others: SortedNodes | None, cycle: int) -> None:  # fmt: skip
    batch.store(sig, hinted, chosen, others, len(others) if others is not None else 0, cycle, recorder)


@dataclass(frozen=True)
class Basic:
    first_pod: str
    first_sig: str
    first_scheduled: bool
    first_chosen: str
    first_others: tuple[str, ...] | None
    second_pod: str
    second_sig: str
    second_chosen: str
    expected_hint: str
    skip_pod: bool = False
    same_cycle: bool = False
    second_nominated: str = ""
    #: what is left of the memory after the second pod stored its results (None: nothing)
    expected_left: tuple[str, ...] | None = None
    #: what the two attempts counted, in order
    expected_events: tuple[tuple[str, str], ...] = ()


BASIC = {
    "a second pod with the same signature gets a hint": Basic(
        "b-1", "sig", True, "n3", ("n1",), "b-2", "sig", "n1", "n1",
        expected_events=(("attempt", "no_hint"), ("attempt", "hint_used")),
    ),
    "a second pod with a different signature doesn't get a hint": Basic(
        "a-1", "sig", True, "n3", ("n1",), "a-2", "sig2", "n1", "",
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "pod_incompatible"), ("attempt", "no_hint"),
            ("flushed", "empty_list"),
        ),
    ),
    "pod doesn't get hint if previous pod didn't scheduled": Basic(
        "b-1", "sig", False, "n3", ("n1",), "b-2", "sig", "n1", "",
        expected_events=(("attempt", "no_hint"), ("attempt", "no_hint"), ("flushed", "empty_list")),
    ),
    "empty list": Basic(
        "b-1", "sig", True, "n3", (), "b-2", "sig", "n4", "",
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "empty_list"),
            ("attempt", "no_hint"), ("flushed", "empty_list"),
        ),
    ),
    "nil list": Basic(
        "b-1", "sig", True, "n3", None, "b-2", "sig", "n4", "",
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "empty_list"),
            ("attempt", "no_hint"), ("flushed", "empty_list"),
        ),
    ),
    "pod doesn't get hint because the previous pod is to a different profile": Basic(
        "b-1", "sig", True, "n3", ("n1",), "b-2", "sig", "n1", "", skip_pod=True,
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "pod_skipped"),
            ("attempt", "no_hint"), ("flushed", "empty_list"),
        ),
    ),
    # GenericWorkload is off (kopf-scheduler behaves as off): a pod of the same cycle is a skipped one
    "pod doesn't use batch from preceding pod when they are from the same cycle state, but GenericWorkload "
    "is disabled": Basic(
        "b-1", "sig", True, "n3", ("n1",), "b-2", "sig", "n1", "", same_cycle=True,
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "pod_skipped"),
            ("attempt", "no_hint"), ("flushed", "empty_list"),
        ),
    ),
    "pod uses batch from preceding pod and leaves remaining batch to next pod": Basic(
        "b-1", "sig", True, "n3", ("n1", "n2"), "b-2", "sig", "n1", "n1", expected_left=("n2",),
        expected_events=(("attempt", "no_hint"), ("attempt", "hint_used")),
    ),
    "a second pod with a nominated node does not get a hint": Basic(
        "b-1", "sig", True, "n3", ("n1",), "b-2", "sig", "n1", "", second_nominated="n1",
        expected_events=(
            ("attempt", "no_hint"), ("flushed", "pod_nominated"), ("attempt", "no_hint"),
            ("flushed", "empty_list"),
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", BASIC.values(), ids=BASIC.keys())
def test_batch_basic(case: Basic) -> None:
    batch, _ = batch_with()
    recorder = Counted()
    first = pod(case.first_pod)
    state = CycleState()
    snapshot = snapshot_of({})
    hint = batch.node_hint(first, case.first_sig, state, 1, snapshot, recorder)
    assert hint == ""
    others = nodes(*case.first_others) if case.first_others is not None else None
    if case.first_scheduled:
        store(batch, recorder, case.first_sig, hint, case.first_chosen, others, 1)
    cycle = 3 if case.skip_pod else 1 if case.same_cycle else 2
    second = pod(case.second_pod, case.second_nominated)
    # the node the first pod took, with it (the blocking filter then rejects a second blocking pod)
    snapshot = snapshot_of({case.first_chosen: [case.first_pod]})
    hint = batch.node_hint(second, case.second_sig, state, cycle, snapshot, recorder)
    assert hint == case.expected_hint
    store(batch, recorder, case.second_sig, hint, case.second_chosen, None, cycle)
    memory = batch._memory
    left = None if memory is None or not len(memory.nodes) else tuple(memory.nodes.remaining()[0])
    assert left == case.expected_left
    if case.expected_left is not None:
        assert memory is not None and memory.signature == case.second_sig
    assert tuple(recorder.events) == case.expected_events


N1_CACHED_SCORE = 50


@dataclass(frozen=True)
class Rescore:
    score: int = 0
    filter_err: bool = False
    pre_score_err: bool = False
    score_err: bool = False
    norm_err: bool = False
    chosen_node_missing: bool = False
    cached_node_missing: bool = False
    expected_hint: str = ""
    expected_remaining: tuple[str, ...] = ()
    #: the flush counted, if any (upstream's reasons)
    flushed: str = ""


RESCORE = {
    "rescored node wins": Rescore(score=100, expected_hint="n2", expected_remaining=("n1",)),
    "rescored node loses": Rescore(score=10, expected_hint="n1", expected_remaining=("n2",)),
    "filter error gives no hint": Rescore(score=100, filter_err=True, expected_remaining=("n1",),
                                          flushed="filter_error"),
    "prescore error gives no hint": Rescore(pre_score_err=True, expected_remaining=("n1",),
                                            flushed="prescore_error"),
    "score error gives no hint": Rescore(score_err=True, expected_remaining=("n1",), flushed="rescore_error"),
    "normalize error gives no hint": Rescore(norm_err=True, expected_remaining=("n1",),
                                             flushed="normalize_error"),
    "chosen node missing from lister gives no hint": Rescore(
        chosen_node_missing=True, expected_remaining=("n1",), flushed="node_missing"
    ),
    "cached node missing from lister gives no hint": Rescore(
        score=100, cached_node_missing=True, expected_remaining=("n1",), flushed="node_missing"
    ),
}  # fmt: skip


def cached_n1() -> SortedNodes:
    return SortedNodes(
        ["n1"], {"configurableScore": np.array([N1_CACHED_SCORE])}, np.array([N1_CACHED_SCORE])
    )


@pytest.mark.parametrize("case", RESCORE.values(), ids=RESCORE.keys())
def test_batch_rescore(case: Rescore) -> None:
    score = ConfigurableScore(case.score, case.pre_score_err, case.score_err, case.norm_err)
    batch, _ = batch_with(score, ConfigurableFilter(case.filter_err))
    recorder = Counted()
    batch.node_hint(pod("a-1"), "sig", CycleState(), 1, snapshot_of({}), recorder)
    store(batch, recorder, "sig", "", "n2", cached_n1(), 1)
    listed: dict[str, list[str]] = {}
    if not case.chosen_node_missing:
        listed = {"n2": ["a-1"]} if case.cached_node_missing else {"n1": [], "n2": ["a-1"]}
    recorder.events.clear()
    hint = batch.node_hint(pod("a-2"), "sig", CycleState(), 2, snapshot_of(listed), recorder)
    assert hint == case.expected_hint
    assert batch._memory is not None
    assert batch._memory.nodes.remaining()[0] == list(case.expected_remaining)
    rescored = not case.chosen_node_missing and not case.filter_err
    expected = [("rescore", "p")] if rescored else []
    expected += [("flushed", case.flushed), ("attempt", "no_hint")] if case.flushed else []
    assert recorder.events == expected
    if case.expected_hint:  # normalisation saw the remembered node and the rescored one, after pre-score
        assert score.seen_by_normalize == [2]


def test_batch_rescore_chain() -> None:
    """Three pods: the node the first took is rescored for each next one and wins each time; the
    remembered node stays for a fourth."""
    score = ConfigurableScore(100)
    batch, _ = batch_with(score)
    recorder = Counted()
    batch.node_hint(pod("a-1"), "sig", CycleState(), 1, snapshot_of({}), recorder)
    store(batch, recorder, "sig", "", "n2", cached_n1(), 1)
    snapshot = snapshot_of({"n1": [], "n2": ["a-1"]})
    hint2 = batch.node_hint(pod("a-2"), "sig", CycleState(), 2, snapshot, recorder)
    assert hint2 == "n2"
    store(batch, recorder, "sig", hint2, "n2", None, 2)
    hint3 = batch.node_hint(pod("a-3"), "sig", CycleState(), 3, snapshot, recorder)
    assert hint3 == "n2"
    assert batch._memory is not None and batch._memory.nodes.remaining()[0] == ["n1"]
    assert recorder.events == [
        ("attempt", "no_hint"),
        ("rescore", "p"),
        ("attempt", "hint_used"),
        ("rescore", "p"),
    ]
    assert batch.batched_pods == 1


def test_a_memory_older_than_500_ms_is_flushed_as_expired() -> None:
    batch, clock = batch_with()
    recorder = Counted()
    batch.node_hint(pod("b-1"), "sig", CycleState(), 1, snapshot_of({}), recorder)
    store(batch, recorder, "sig", "", "n3", nodes("n1", "n2"), 1)
    clock.advance(0.5)  # exactly 500 ms: still usable (upstream: now after creation + maxBatchAge)
    snapshot = snapshot_of({"n3": ["b-1"]})
    assert batch.node_hint(pod("b-2"), "sig", CycleState(), 2, snapshot, recorder) == "n1"
    store(batch, recorder, "sig", "n1", "n1", None, 2)
    clock.advance(0.001)
    recorder.events.clear()
    assert batch.node_hint(pod("b-3"), "sig", CycleState(), 3, snapshot, recorder) == ""
    assert recorder.events == [("flushed", "expired"), ("attempt", "no_hint")]


def test_a_hint_not_taken_is_counted_and_the_new_order_remembered() -> None:
    batch, _ = batch_with()
    recorder = Counted()
    batch.node_hint(pod("b-1"), "sig", CycleState(), 1, snapshot_of({}), recorder)
    store(batch, recorder, "sig", "", "n3", nodes("n1", "n2"), 1)
    hint = batch.node_hint(pod("b-2"), "sig", CycleState(), 2, snapshot_of({"n3": ["b-1"]}), recorder)
    assert hint == "n1"
    store(batch, recorder, "sig", hint, "n2", nodes("n4"), 2)
    assert recorder.events[-1] == ("attempt", "hint_not_used")
    assert batch._memory is not None and batch._memory.nodes.remaining()[0] == ["n4"]


def test_an_unsigned_pod_flushes_as_not_batchable() -> None:
    batch, _ = batch_with()
    recorder = Counted()
    assert batch.node_hint(pod("a-1"), None, CycleState(), 1, snapshot_of({}), recorder) == ""
    store(batch, recorder, None, "", "n1", None, 1)
    batch.store(None, "", "n1", None, 2, 2, recorder)  # two other nodes were scored, but it has no signature
    assert recorder.events == [
        ("attempt", "no_hint"),
        ("flushed", "empty_list"),
        ("flushed", "pod_not_batchable"),
    ]
