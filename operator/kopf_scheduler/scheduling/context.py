"""What one scheduling cycle reads and what it hands back.

The cycle (``schedule_one``), shadow verdicts (``shadow``) and explanations (``explain``) depend on
these small protocols, never on the ``Scheduler`` that satisfies them: the scheduler calls down into the
cycle, and nothing in the cycle calls back up. Timings and outcomes go to the framework runtime's
``Recorder``; explanations to an ``Explains`` when one is asked for.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kopf_scheduler.backend.cache import Cache, Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.backend.queue import SchedulingQueue
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.diagnosis import Diagnosis, FitError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import Framework, ScoreBreakdown
from kopf_scheduler.framework.runtime.recorder import Recorder


@dataclass(slots=True)
class ScheduleResult:
    """The node a cycle picked, and how it got there."""

    host: str
    evaluated_nodes: int
    feasible_nodes: int
    #: for --explain: feasible rows, their totals and the per-plugin breakdown
    rows: np.ndarray | None = None
    totals: np.ndarray | None = None
    breakdown: ScoreBreakdown | None = None
    diagnosis: Diagnosis | None = None


class Explains(Protocol):
    """Takes each decision's explanation (``simulate --explain``, ``explain``)."""

    def success(self, pod: PodInfo, result: ScheduleResult) -> None: ...

    def failure(self, pod: PodInfo, fit_error: FitError) -> None: ...


class ClusterView(Protocol):
    """The scheduler's view of the cluster that explanations read."""

    @property
    def profiles(self) -> Mapping[str, Framework]: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def objects(self) -> ClusterObjects: ...


class CycleContext(Protocol):
    """What a scheduling cycle and its binding cycle read and update."""

    client: ClusterClient
    cache: Cache
    snapshot: Snapshot
    queue: SchedulingQueue
    rng: random.Random
    #: the profile-wide default of ``percentageOfNodesToScore`` (0: adaptive)
    percentage_of_nodes_to_score: int
    #: where the next filter pass starts (the rotation over the nodes)
    next_start_node_index: int
    #: bindings answered with 404 or 409: the pod was deleted or bound elsewhere meanwhile
    binding_conflicts: int
    recorder: Recorder
    explainer: Explains | None
