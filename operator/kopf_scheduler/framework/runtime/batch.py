"""Opportunistic batching (gate ``OpportunisticBatching``): a profile's memory of the nodes it sorted for
the pod it scheduled last, offered to the next pod with the same signature (upstream's
``framework/runtime/batch.go`` at v1.37.2).

Which pods: a profile signs pods only when every one of its pre-filter, filter, pre-score and score
plugins implements ``SignPlugin`` and it has no extenders (``computeBatchablePlugins``); a pod is signed
when each of those plugins gives its fragments, and unsigned (``None``) when one refuses.

The hint: after a pod with a signature was scheduled by scoring more than one node, the other feasible
nodes are kept in their order (best first), with their raw scores. The next pod of the profile gets the
best of them as a hint when it comes in the very next scheduling cycle, the previous pod succeeded, it has
no nominated node, its signature is the same and the memory is at most 500 ms old. Before that, the node
the previous pod took is filtered again; if it still fits it is scored again and competes (the kept nodes'
raw scores and its fresh ones are normalised together). The cycle then filters only the hinted node; if it
fits, the pod goes there unscored, and the rest of the memory stays for the next pod.

Each reason the memory is thrown away is counted (``scheduler_batch_cache_flushed_total``), as is each
attempt's outcome (``scheduler_batch_attempts_total``): no hint, hint used, hint not used.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.extenders import HTTPExtender
from kopf_scheduler.framework.interface import (
    FilterPlugin,
    NodeSet,
    PreFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    SnapshotLister,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.signers import signature
from kopf_scheduler.framework.status import Status

#: the feature gate
OPPORTUNISTIC_BATCHING = "OpportunisticBatching"
#: how long a memory may be used (upstream's ``maxBatchAge``)
MAX_BATCH_AGE = 0.5

# the results of an attempt (``metrics.BatchAttempt*``)
NO_HINT = "no_hint"
HINT_USED = "hint_used"
HINT_NOT_USED = "hint_not_used"

# why the memory was thrown away (``metrics.BatchFlush*``)
POD_FAILED = "pod_failed"
POD_SKIPPED = "pod_skipped"
POD_NOMINATED = "pod_nominated"
NODE_MISSING = "node_missing"
EMPTY_LIST = "empty_list"
EXPIRED = "expired"
POD_INCOMPATIBLE = "pod_incompatible"
POD_NOT_BATCHABLE = "pod_not_batchable"
FILTER_ERROR = "filter_error"
PRESCORE_ERROR = "prescore_error"
RESCORE_ERROR = "rescore_error"
NORMALIZE_ERROR = "normalize_error"


class BatchHandle(Protocol):
    """What batching needs of its profile's framework (upstream's ``batchHandle``)."""

    profile_name: str
    clock: Clock
    rng: random.Random
    feature_gates: FeatureGates
    extenders: list[HTTPExtender]
    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    pre_score: list[PreScorePlugin]
    score: list[ScorePlugin]

    def run_filter_chain(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...

    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None: ...

    def run_raw_score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, int] | Status: ...

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, np.ndarray], count: int
    ) -> tuple[np.ndarray, Status | None]: ...


class SortedNodes:
    """Scored nodes, best first (upstream's ``SortedScoredNodes``): names, raw scores by plugin and
    totals, aligned; ``pop`` takes the best."""

    __slots__ = ("_next", "names", "raw", "totals")

    def __init__(self, names: list[str], raw: dict[str, np.ndarray], totals: np.ndarray) -> None:
        self.names = names
        self.raw = raw
        self.totals = totals
        self._next = 0

    @classmethod
    def ordered(
        cls, names: list[str], raw: dict[str, np.ndarray], totals: np.ndarray, tie_keys: np.ndarray
    ) -> SortedNodes:
        """The nodes sorted by total, highest first; equal totals in the order of ``tie_keys``."""
        order = np.lexsort((tie_keys, -totals))
        return cls([names[i] for i in order.tolist()], {k: v[order] for k, v in raw.items()}, totals[order])

    def __len__(self) -> int:
        return len(self.names) - self._next

    def pop(self) -> str:
        name = self.names[self._next]
        self._next += 1
        return name

    def remaining(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """The nodes not popped yet and their raw scores."""
        at = self._next
        return self.names[at:], {k: v[at:] for k, v in self.raw.items()}


@dataclass(slots=True)
class _Memory:
    signature: str
    nodes: SortedNodes
    created: float


@dataclass(slots=True)
class _LastCycle:
    cycle: int = -1
    chosen: str = ""
    succeeded: bool = False


class OpportunisticBatch:
    """One profile's batching state (upstream's ``OpportunisticBatch``)."""

    def __init__(self, framework: BatchHandle, signers: Sequence[SignPlugin]) -> None:
        self.framework = framework
        #: the plugins that sign, in the order of the extension points (None: the profile signs no pod)
        self.signers: Sequence[SignPlugin] | None = signers
        self._memory: _Memory | None = None
        self._last = _LastCycle()
        #: pods placed on a hinted node (for tests, as upstream's ``batchedPods``)
        self.batched_pods = 0

    # -- signing ---------------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> str | None:
        """The pod's signature, or None when the profile or one of its plugins cannot sign it
        (upstream's ``SignPod``)."""
        if self.signers is None:
            return None
        fragments: list[SignFragment] = []
        for plugin in self.signers:
            try:
                got = plugin.sign_pod(pod)
            except Exception:
                return None
            if isinstance(got, Status):
                return None
            fragments.extend(got)
        return signature(pod.scheduler_name, fragments)

    # -- the hint --------------------------------------------------------------------------------------
    def node_hint(
        self,
        pod: PodInfo,
        signature: str | None,
        state: CycleState,
        cycle: int,
        snapshot: SnapshotLister,
        recorder: Recorder,
    ) -> str:
        """The node to try first for ``pod``, or "" (upstream's ``GetNodeHint``)."""
        hint = ""
        if self._compatible(pod, signature, cycle, recorder) and self._refresh(
            pod, state, snapshot, recorder
        ):
            assert self._memory is not None
            hint = self._memory.nodes.pop()
        if not hint:
            recorder.batch_attempt(self.framework.profile_name, NO_HINT)
        return hint

    def store(
        self,
        signature: str | None,
        hinted: str,
        chosen: str,
        others: SortedNodes | None,
        others_count: int,
        cycle: int,
        recorder: Recorder,
    ) -> None:
        """Remembers the cycle's outcome and, for a signed pod, the other nodes it sorted (upstream's
        ``StoreScheduleResults``); ``others_count``: how many nodes besides the chosen one were scored
        (``others`` is built only for a signed pod)."""
        profile = self.framework.profile_name
        self._last = _LastCycle(cycle, chosen, True)
        if hinted == chosen:  # the hint was used: what is left of the memory stays for the next pod
            recorder.batch_attempt(profile, HINT_USED)
            self.batched_pods += 1
            return
        if hinted:
            recorder.batch_attempt(profile, HINT_NOT_USED)
        if signature is not None and others is not None and len(others):
            self._memory = _Memory(signature, others, self.framework.clock.now())
            return
        reason = EMPTY_LIST if not others_count else POD_NOT_BATCHABLE
        self._flush(reason, recorder)

    def _flush(self, reason: str, recorder: Recorder) -> None:
        recorder.batch_flushed(self.framework.profile_name, reason)
        self._memory = None

    def _compatible(self, pod: PodInfo, signature: str | None, cycle: int, recorder: Recorder) -> bool:
        """Whether the memory may serve ``pod`` (upstream's ``batchStateCompatible``). As upstream, a
        reason against it is counted as a flush, but the memory itself is replaced only when the cycle
        stores its outcome."""
        memory = self._memory
        if memory is None or not len(memory.nodes):
            return False
        if cycle != self._last.cycle + 1:  # another profile's pod, or a pod that failed, came between
            recorder.batch_flushed(self.framework.profile_name, POD_SKIPPED)
            return False
        if not self._last.succeeded:
            recorder.batch_flushed(self.framework.profile_name, POD_FAILED)
            return False
        if pod.nominated_node_name:
            recorder.batch_flushed(self.framework.profile_name, POD_NOMINATED)
            return False
        if signature is None or signature != memory.signature:
            recorder.batch_flushed(self.framework.profile_name, POD_INCOMPATIBLE)
            return False
        if self.framework.clock.now() > memory.created + MAX_BATCH_AGE:
            recorder.batch_flushed(self.framework.profile_name, EXPIRED)
            return False
        return True

    def _refresh(self, pod: PodInfo, state: CycleState, snapshot: SnapshotLister, recorder: Recorder) -> bool:
        """Filters the node the previous pod took again; if it still fits, scores it again so that it
        competes with the remembered nodes (upstream's ``refreshHintCandidates``)."""
        profile = self.framework.profile_name
        node = snapshot.get(self._last.chosen)
        if node is None:
            recorder.batch_flushed(profile, NODE_MISSING)
            return False
        status = self.framework.run_filter_chain(state, pod, node)
        if status is None or status.is_success:
            return self._rescore(pod, state, snapshot, recorder)
        if not status.is_rejection:
            recorder.batch_flushed(profile, FILTER_ERROR)
            return False
        return True

    def _rescore(self, pod: PodInfo, state: CycleState, snapshot: SnapshotLister, recorder: Recorder) -> bool:
        assert self._memory is not None
        fwk, profile = self.framework, self.framework.profile_name
        recorder.batch_rescore(profile)
        names, raw = self._memory.nodes.remaining()
        names = [*names, self._last.chosen]
        rows = [snapshot.index_of(name) for name in names]
        if any(row is None for row in rows):
            recorder.batch_flushed(profile, NODE_MISSING)
            return False
        rescore_state = state.clone()  # what pre-score writes here stays out of the pod's cycle
        nodes = NodeSet(snapshot, np.asarray(rows, dtype=np.int64))
        if fwk.run_pre_score(rescore_state, pod, nodes) is not None:
            recorder.batch_flushed(profile, PRESCORE_ERROR)
            return False
        fresh = fwk.run_raw_score(rescore_state, pod, nodes[len(names) - 1])
        if isinstance(fresh, Status):
            recorder.batch_flushed(profile, RESCORE_ERROR)
            return False
        count = len(names)
        merged: dict[str, np.ndarray] = {}
        for name in raw.keys() | fresh.keys():
            kept = raw.get(name)
            column = np.zeros(count, dtype=np.int64)
            if kept is not None:
                column[: count - 1] = kept
            column[count - 1] = fresh.get(name, 0)
            merged[name] = column
        totals, status = fwk.normalize_scores(rescore_state, pod, merged, count)
        if status is not None:
            recorder.batch_flushed(profile, NORMALIZE_ERROR)
            return False
        tie_keys = np.asarray([fwk.rng.random() for _ in range(count)])
        self._memory.nodes = SortedNodes.ordered(names, merged, totals, tie_keys)
        return True


def batch_for(framework: BatchHandle) -> OpportunisticBatch | None:
    """The framework's batching state when the gate is on, None when it is off. Signing is off for a
    profile with extenders or with a plugin that does not sign (``computeBatchablePlugins``)."""
    if not framework.feature_gates.enabled(OPPORTUNISTIC_BATCHING):
        return None
    candidates = [*framework.pre_filter, *framework.filter, *framework.pre_score, *framework.score]
    signers: list[SignPlugin] = []
    seen: set[str] = set()
    signs = not framework.extenders
    for plugin in candidates:
        if plugin.name in seen:
            continue
        seen.add(plugin.name)
        if isinstance(plugin, SignPlugin):
            signers.append(plugin)
        else:
            signs = False
    batch = OpportunisticBatch(framework, signers)
    if not signs:
        batch.signers = None
    return batch
