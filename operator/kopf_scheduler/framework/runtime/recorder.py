"""Where a scheduling attempt reports what it took: upstream's metrics recorder.

The queue, the cycle and the binding cycle tell the recorder the duration of each extension point, of
the scheduling algorithm and of a Permit wait, what preemption did, and the end of an attempt (bound, or
failed with its reason); whoever wants those figures (the Prometheus metrics, a test) subscribes a hook.
Nothing here knows who listens, and nothing flows back to the scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kopf_scheduler.framework.pod_info import QueuedPodInfo
from kopf_scheduler.framework.status import Status

#: (extension point, status code label, profile, seconds)
ExtensionHook = Callable[[str, str, str, float], None]
#: (the pod's attempt, node, when the attempt started)
BoundHook = Callable[[QueuedPodInfo, str, float], None]
#: (the pod's attempt, event reason, message, result label, when the attempt started)
FailedHook = Callable[[QueuedPodInfo, str, str, str, float], None]
#: (seconds) from an attempt's start to the end of its scheduling algorithm (filter, score, post-filter)
AlgorithmHook = Callable[[float], None]
#: (status code label, seconds) of a pod's wait at Permit
PermitWaitHook = Callable[[str, float], None]
#: DefaultPreemption's post-filter ran (upstream's ``PreemptionAttempts``)
PreemptionAttemptHook = Callable[[], None]
#: (victims) of the candidate preemption chose, before any is preempted
PreemptionVictimsHook = Callable[[int], None]
#: ("success" or "error") the victims' preemption, done apart from the cycle, ended so
PreemptionExecutionHook = Callable[[str], None]
#: (profile, result or reason) of opportunistic batching: an attempt's outcome, a flush of its memory
BatchHook = Callable[[str, str], None]
#: (profile) opportunistic batching scored the previous pod's node again
BatchRescoreHook = Callable[[str], None]
#: (profile, result, seconds) a pod group's attempt ended ("scheduled", "unschedulable",
#: "waiting_on_preemption", "error") that long after it started
PodGroupAttemptHook = Callable[[str, str, float], None]
#: (status code label) DefaultPreemption's PodGroupPostFilter ran and answered so
WorkloadPreemptionAttemptHook = Callable[[str], None]
#: (preemptor "pod" or "podgroup", status code label or "success"/"error", seconds): preemption's search
#: for victims, or the victims' preemption apart from the cycle
PreemptionTimingHook = Callable[[str, str, float], None]
#: (preemptor, count) of the candidate chosen: PodGroups disrupted whole, PodDisruptionBudgets violated
PreemptionCountHook = Callable[[str, int], None]

#: the preemptor labels (upstream's entity key types)
POD = "pod"
POD_GROUP = "podgroup"


class Recorder:
    """Fans each observation out to the hooks subscribed to it; with no hook an observation costs a
    list check."""

    def __init__(self) -> None:
        self.extension_hooks: list[ExtensionHook] = []
        self.bound_hooks: list[BoundHook] = []
        self.failed_hooks: list[FailedHook] = []
        self.algorithm_hooks: list[AlgorithmHook] = []
        self.permit_wait_hooks: list[PermitWaitHook] = []
        self.preemption_attempt_hooks: list[PreemptionAttemptHook] = []
        self.preemption_victims_hooks: list[PreemptionVictimsHook] = []
        self.preemption_execution_hooks: list[PreemptionExecutionHook] = []
        self.batch_attempt_hooks: list[BatchHook] = []
        self.batch_flush_hooks: list[BatchHook] = []
        self.batch_rescore_hooks: list[BatchRescoreHook] = []
        # GenericWorkload: the pod group cycle and the preemption it and single pods run
        self.pod_group_attempt_hooks: list[PodGroupAttemptHook] = []
        self.pod_group_algorithm_hooks: list[AlgorithmHook] = []
        self.workload_preemption_attempt_hooks: list[WorkloadPreemptionAttemptHook] = []
        self.workload_preemption_victims_hooks: list[PreemptionVictimsHook] = []
        self.preemption_evaluation_hooks: list[PreemptionTimingHook] = []
        self.preemption_execution_duration_hooks: list[PreemptionTimingHook] = []
        self.preemption_disruptions_hooks: list[PreemptionCountHook] = []
        self.preemption_pdb_violations_hooks: list[PreemptionCountHook] = []

    def observe(self, point: str, status: Status | None, profile: str, started: float) -> None:
        """``point`` of ``profile`` ran from ``started`` (``time.perf_counter``) until now."""
        if self.extension_hooks:
            seconds = time.perf_counter() - started
            label = "Success" if status is None else status.code.label
            for hook in self.extension_hooks:
                hook(point, label, profile, seconds)

    def algorithm(self, started: float) -> None:
        """The scheduling algorithm of the attempt that started at ``started`` ended now."""
        if self.algorithm_hooks:
            seconds = time.perf_counter() - started
            for hook in self.algorithm_hooks:
                hook(seconds)

    def permit_waited(self, status: Status | None, started: float) -> None:
        """A pod waited at Permit from ``started`` until now, and the wait ended with ``status``."""
        if self.permit_wait_hooks:
            seconds = time.perf_counter() - started
            label = "Success" if status is None else status.code.label
            for hook in self.permit_wait_hooks:
                hook(label, seconds)

    def preemption_attempted(self) -> None:
        for attempt in self.preemption_attempt_hooks:
            attempt()

    def preemption_victims(self, victims: int) -> None:
        for hook in self.preemption_victims_hooks:
            hook(victims)

    def preemption_executed(self, result: str, preemptor: str, started: float) -> None:
        """The victims' preemption of ``preemptor``, begun at ``started`` apart from the cycle, ended with
        ``result`` ("success" or "error")."""
        for hook in self.preemption_execution_hooks:
            hook(result)
        if self.preemption_execution_duration_hooks:
            seconds = time.perf_counter() - started
            for timing in self.preemption_execution_duration_hooks:
                timing(preemptor, result, seconds)

    def preemption_evaluated(self, preemptor: str, status: Status | None, started: float) -> None:
        """Preemption's search for victims for ``preemptor``, begun at ``started``, ended with ``status``."""
        if self.preemption_evaluation_hooks:
            seconds = time.perf_counter() - started
            label = "Success" if status is None else status.code.label
            for hook in self.preemption_evaluation_hooks:
                hook(preemptor, label, seconds)

    def preemption_candidate(
        self, preemptor: str, victims: int, disruptions: int, pdb_violations: int
    ) -> None:
        """The candidate preemption is about to act on (upstream's ``observeVictims``): a pod group's
        victims (a single pod's are ``preemption_victims``), the PodGroups it disrupts whole and the
        PodDisruptionBudgets it violates, each of the last two only when there are any."""
        if preemptor != POD:
            for hook in self.workload_preemption_victims_hooks:
                hook(victims)
        if disruptions > 0:
            for count in self.preemption_disruptions_hooks:
                count(preemptor, disruptions)
        if pdb_violations > 0:
            for count in self.preemption_pdb_violations_hooks:
                count(preemptor, pdb_violations)

    def workload_preemption_attempted(self, status: Status | None) -> None:
        label = "Success" if status is None else status.code.label
        for hook in self.workload_preemption_attempt_hooks:
            hook(label)

    def pod_group_attempt(self, profile: str, result: str, started: float) -> None:
        """A pod group's attempt under ``profile``, begun at ``started``, ended with ``result``."""
        if self.pod_group_attempt_hooks:
            seconds = time.perf_counter() - started
            for hook in self.pod_group_attempt_hooks:
                hook(profile, result, seconds)

    def pod_group_algorithm(self, started: float) -> None:
        """The pod group algorithm of the attempt begun at ``started`` ended now."""
        if self.pod_group_algorithm_hooks:
            seconds = time.perf_counter() - started
            for hook in self.pod_group_algorithm_hooks:
                hook(seconds)

    def batch_attempt(self, profile: str, result: str) -> None:
        for hook in self.batch_attempt_hooks:
            hook(profile, result)

    def batch_flushed(self, profile: str, reason: str) -> None:
        for hook in self.batch_flush_hooks:
            hook(profile, reason)

    def batch_rescore(self, profile: str) -> None:
        for hook in self.batch_rescore_hooks:
            hook(profile)

    def bound(self, qp: QueuedPodInfo, node: str, started: float) -> None:
        for hook in self.bound_hooks:
            hook(qp, node, started)

    def failed(self, qp: QueuedPodInfo, reason: str, message: str, result: str, started: float) -> None:
        for hook in self.failed_hooks:
            hook(qp, reason, message, result, started)
