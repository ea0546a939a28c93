"""NodeResourcesBalancedAllocation: prefers nodes whose balance of the configured resources (cpu and
memory by default) the pod improves (upstream's ``noderesources/balanced_allocation.go`` and
``resource_allocation.go`` at v1.37.2, ``useRequested``).

Per resource with allocatable > 0: ``f = min(requested / allocatable, 1)``, using real requests (not the
100m / 200 MiB stand-ins NodeResourcesFit scores with). ``std`` is ``|f1 - f2| / 2`` for two fractions,
the population standard deviation for more, 0 for fewer; a balance is ``int((1 - std) * 100)``, in
``[50, 100]``. The score compares the balance with the pod (node requested + pod request) and without it
(node requested): ``50 + (50 + with - without) / 2`` (Go's integer division), so about 75 when the pod
changes little, towards 100 when it improves the balance, towards 50 when it worsens it. Extended
(scalar) resources count only when the pod requests them. Pre-score skips pods that request none of the
resources (best-effort pods, kubernetes#129138).

The vectorised score repeats the per-node floating-point operations in the same order, so both forms
give identical integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework import signers
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    NodeSet,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects.extended_resources import DeviceClassResolver, device_class_resolver
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.node_resources_balanced_allocation.args import Args

NAME = names.NODE_RESOURCES_BALANCED_ALLOCATION
#: the feature gate of extended resources backed by DRA (signing only: the scores do not change)
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"
_ALWAYS_COUNTED = frozenset({res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE})


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    #: the pod's requests, in the order of ``Args.resources``
    requests: tuple[int, ...]

    def clone(self) -> _PreScoreState:
        return self


_PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def _is_scalar(name: str) -> bool:
    # upstream's IsScalarResourceName: extended, hugepages, attachable volumes, prefixed native resources
    return res.is_scalar(name) or "kubernetes.io/" in name


def balance(requested: list[int], allocatable: list[int]) -> int:
    """``balancedResourceScore``: resources with zero allocatable are left out."""
    fractions: list[float] = []
    total = 0.0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fraction = min(float(req) / float(alloc), 1.0)
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def balanced_score(requested: list[int], allocated: list[int], allocatable: list[int]) -> int:
    """``balancedResourceScorer``: the balance with the pod (``requested``) against the balance without
    it (``allocated``)."""
    return _improvement(balance(requested, allocatable), balance(allocated, allocatable))


def _improvement(with_pod: int, without_pod: int) -> int:
    # both balances are in [50, 100]: the dividend is never negative, so // truncates as Go does
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin, VectorScore, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's requests; unsigned when DRA would allocate one of them (``DRAExtendedResource``)."""
        return signers.requests(pod, self.classes)

    def __init__(self, args: Args, classes: DeviceClassResolver | None = None) -> None:
        self.resources = [spec.name for spec in args.resources]
        #: the DeviceClasses standing for extended resources (``DRAExtendedResource`` on), for signing only
        self.classes = classes

    def _pod_requests(self, pod: PodInfo) -> tuple[int, ...]:
        return tuple(pod.requests.get(name, 0) for name in self.resources)

    def _counted(self, name: str, pod_amount: int) -> bool:
        return name in _ALWAYS_COUNTED or (pod_amount != 0 and _is_scalar(name))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        requests = self._pod_requests(pod)
        if not any(requests):
            return SKIP  # best-effort: scoring it would pile such pods onto the emptiest node
        state.write(_PRE_SCORE_KEY, _PreScoreState(requests))
        return None

    def _requests(self, state: CycleState, pod: PodInfo) -> tuple[int, ...]:
        found = state.get(_PRE_SCORE_KEY)
        return found.requests if found is not None else self._pod_requests(pod)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        pod_requests = self._requests(state, pod)
        if not any(pod_requests):
            return 0
        requested, allocated, allocatable = [], [], []
        for name, pod_amount in zip(self.resources, pod_requests, strict=True):
            alloc = node.allocatable.get(name, 0) if self._counted(name, pod_amount) else 0
            on_node = node.requested.get(name, 0) if alloc else 0
            allocatable.append(alloc)
            allocated.append(on_node)
            requested.append(on_node + pod_amount if alloc else 0)
        return balanced_score(requested, allocated, allocatable)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        pod_requests = self._requests(state, pod)
        n = len(rows)
        if not any(pod_requests):
            return np.zeros(n, dtype=np.int64)
        with_pod: list[np.ndarray] = []  # fractions per counted resource, in the configured order
        without_pod: list[np.ndarray] = []
        valid: list[np.ndarray] = []
        all_valid = True
        for name, pod_amount in zip(self.resources, pod_requests, strict=True):
            col = table.column.get(name)
            if col is None or not self._counted(name, pod_amount):
                continue
            alloc = table.allocatable[rows, col]
            allocated = table.requested[rows, col]
            ok = alloc != 0
            complete = bool(ok.all())
            with_pod.append(_fractions(allocated + pod_amount, alloc, ok, complete))
            without_pod.append(_fractions(allocated, alloc, ok, complete))
            valid.append(ok)
            all_valid = all_valid and complete
        if all_valid:
            return _improvements(_balances_all_valid(with_pod, n), _balances_all_valid(without_pod, n))
        return _improvements(_balances_masked(with_pod, valid, n), _balances_masked(without_pod, valid, n))


def _fractions(requested: np.ndarray, alloc: np.ndarray, ok: np.ndarray, complete: bool) -> np.ndarray:
    # int64 / int64 divides as float64, as Go's float64(req) / float64(alloc)
    fraction = np.minimum(requested / (alloc if complete else np.where(ok, alloc, 1)), 1.0)
    return fraction if complete else np.where(ok, fraction, 0.0)


def _improvements(with_pod: np.ndarray, without_pod: np.ndarray) -> np.ndarray:
    """``_improvement`` per row (the dividend is never negative)."""
    half = MAX_NODE_SCORE // 2
    return half + (half + with_pod - without_pod) // 2


def _to_balance(std: np.ndarray) -> np.ndarray:
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def _balances_all_valid(fractions: list[np.ndarray], n: int) -> np.ndarray:
    """Every node has every resource: one formula for all rows."""
    k = len(fractions)
    if k < 2:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    if k == 2:
        return _to_balance(np.abs((fractions[0] - fractions[1]) / 2))
    total = np.zeros(n)
    for fraction in fractions:  # the same additions, in the same order, as the per-node form
        total = total + fraction
    mean = total / k
    squares = np.zeros(n)
    for fraction in fractions:
        deviation = fraction - mean
        squares = squares + deviation * deviation
    return _to_balance(np.sqrt(squares / k))


def _balances_masked(fractions: list[np.ndarray], valid: list[np.ndarray], n: int) -> np.ndarray:
    """Rows differ in which resources count (zero allocatable): the per-node branches, row by row."""
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    first = np.zeros(n)
    second = np.zeros(n)
    for fraction, ok in zip(fractions, valid, strict=True):  # adding 0.0 for a left-out resource is exact
        total = total + fraction
        first = np.where(ok & (count == 0), fraction, first)
        second = np.where(ok & (count == 1), fraction, second)
        count += ok
    safe = np.maximum(count, 1).astype(np.float64)
    mean = total / safe
    squares = np.zeros(n)
    for fraction, ok in zip(fractions, valid, strict=True):
        deviation = fraction - mean
        squares = squares + np.where(ok, deviation * deviation, 0.0)
    spread = np.where(count > 2, np.sqrt(squares / safe), 0.0)
    return _to_balance(np.where(count == 2, np.abs((first - second) / 2), spread))


def new(args: Args, handle: Handle) -> NodeResourcesBalancedAllocation:
    if handle is None:  # built alone (tests): no cluster objects, no gates
        return NodeResourcesBalancedAllocation(args)
    enabled = handle.feature_gates.enabled(DRA_EXTENDED_RESOURCE)
    return NodeResourcesBalancedAllocation(args, device_class_resolver(handle.objects) if enabled else None)
