"""What the scheduler asks of the cluster: the one narrow door to the API server (or to a simulation).

The ``k8s`` package implements it against a real API server; ``simulate`` implements it in memory.
Reporting methods are fire-and-forget: an implementation queues the API calls, aggregates or rate-limits
them, and never blocks a scheduling cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kopf_scheduler.framework.pod_info import PodInfo


@dataclass(frozen=True, slots=True)
class PreemptorGroup:
    """A Workload API PodGroup preempting (pod group preemption): the victims' events and conditions name
    it, not a pod."""

    namespace: str
    name: str
    uid: str


class APIError(Exception):
    """A failed API call; ``status`` is the HTTP status (409 conflict, 404 gone, 0 for no answer)."""

    def __init__(self, status: int, message: str, *, settled: bool | None = None) -> None:
        """``settled``: whether the answer ends the matter (the pod is bound elsewhere or gone), when
        the caller knows better than the status alone (a 409 from an admission webhook is not)."""
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.settled = settled

    @property
    def is_gone_or_conflict(self) -> bool:
        """The pod is already bound (409) or deleted (404): nothing to retry."""
        return self.settled if self.settled is not None else self.status in (404, 409)


class ClusterClient(Protocol):
    async def bind(self, pod: PodInfo, node_name: str) -> None:
        """POST the pod's binding to the node; raises ``APIError``."""

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        """The ``Normal Scheduled`` event: ``Successfully assigned ns/pod to node``."""

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        """The ``Warning FailedScheduling`` event and the ``PodScheduled=False`` condition with ``reason``
        (``Unschedulable`` or ``SchedulerError``); sets or clears ``status.nominatedNodeName`` when
        ``nominated_node_name`` is not None."""

    async def nominate(self, pod: PodInfo, node_name: str) -> None:
        """Sets ``status.nominatedNodeName`` to ``node_name`` with a PATCH of ``pods/<name>/status`` and
        waits for the answer; nothing is sent when the pod holds that value already (as far as the
        client knows: the pod object, or the client's own later writes). The binding cycle announces so
        the node it is about to bind a pod to whose Permit wait or PreBind takes time
        (NominatedNodeNameForExpectation). Failures are logged, not raised."""

    def record_preempted_in_memory(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        """The ``Normal Preempted`` event (action ``Preempting``, no related object) for a victim stopped
        inside the scheduler instead of deleted (waiting at Permit, or in PreBind):
        ``Preempted by pod <preemptor UID> on node <node_name> (in kube-scheduler memory).``; with
        ``group``, ``podgroup <its UID>`` and the PodGroup as the related object."""

    async def evict(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        """Preempts ``victim`` (on ``node_name``) for ``preemptor``, as kube-scheduler's ``PreemptPod``:

        1. Adds the pod condition ``type: DisruptionTarget, status: "True", reason:
           PreemptionByScheduler, message: "<preemptor's spec.schedulerName>: preempting to accommodate a
           higher priority pod"`` (``lastTransitionTime`` now, ``observedGeneration`` the victim's
           ``metadata.generation``) with a PATCH of ``pods/<name>/status``, unless an identical condition
           is already there.
        2. DELETEs the pod (default grace period, no preconditions).
        3. Records the event ``type: Normal, reason: Preempted, action: Preempting`` on the victim, with
           the note ``Preempted by pod <preemptor UID> on node <node_name>`` and no related object
           (kube-scheduler v1.37.2 cannot make a reference of its wrapper of the preempting pod).

        With ``group`` (pod group preemption) the condition says ``a higher priority podgroup``, and the
        event ``Preempted by podgroup <its UID> on node <node_name>`` with the PodGroup as the related object.

        A 404 at step 1 or 2 means the victim is already gone: return without the event. Any other
        failure raises ``APIError`` (the preemptor is then retried at once). Preemption relies on step 1:
        a victim with ``deletionTimestamp`` and that condition keeps its preemptor from preempting again
        while it terminates. Pods waiting at Permit or in PreBind are stopped by the scheduler itself
        and reach this method only when that came too late.
        """

    # Optional: ``bound_by_extender(pod, node_name) -> None``. A scheduler extender with a bind verb binds
    # pods itself; a client that has no watch to report that binding (the simulator) records it here.

    def clear_nominated_node_name(self, pod: PodInfo) -> None:
        """Fire-and-forget: PATCH ``pods/<name>/status`` so that ``status.nominatedNodeName`` is removed
        (a lower-priority pod nominated to the node a preemptor takes). Failures are logged, not raised."""

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` to its object path (``ObjectKind.object_path``) and return the object the API server
        stored. ``metadata.resourceVersion`` makes it conditional: an object changed since answers 409.
        Raises ``APIError`` whose ``message`` is the API server's own (``Operation cannot be fulfilled on
        persistentvolumes "pv-1": the object has been modified; ...``); 404 when the object is gone.
        The volume binder writes a volume's ``claimRef`` and a claim's selected-node annotation with it."""

    async def get_object(self, path: str) -> dict[str, Any] | None:
        """GET the object at ``path`` as the API server has it now; None when it is gone. Raises
        ``APIError``. DynamicResources re-reads a claim with it after a conflicting write."""

    async def patch_object(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Strategic-merge PATCH of the object (or subresource) at ``path``; returns the object stored.
        Raises ``APIError``. DynamicResources removes a pod's entry from a claim's ``reservedFor`` with
        it, without needing the latest claim."""

    async def create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``obj`` to the collection at ``path`` and return the object the API server stored (its
        name generated from ``metadata.generateName`` when it has none). Raises ``APIError``.
        DynamicResources creates the ResourceClaim of a pod's extended resources with it."""

    async def delete_object(self, path: str) -> None:
        """DELETE the object at ``path``. Raises ``APIError`` (404 when it is gone already).
        DynamicResources deletes the claim of extended resources whose binding failed with it."""
