"""GangScheduling: kube-scheduler v1.37's gang scheduling over the Workload API's PodGroups
(``scheduling.k8s.io/v1beta1``, feature gate GenericWorkload).

In the default profile only with GenericWorkload on, as upstream appends it. Its pods are then queued as
one entity per PodGroup (``backend/queue/pod_groups.py``) and tried together in a pod group scheduling
cycle (``scheduling/schedule_pod_group.py``), which asks its PlacementFeasible after each pod.
"""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.gang_scheduling.plugin import (
    NAME,
    PERMIT_TIMEOUT_SECONDS,
    WAITING_FOR_MIN_COUNT_PODS,
    WAITING_FOR_MIN_COUNT_SCHEDULED,
    GangScheduling,
    min_count_not_yet_satisfied,
    min_count_unsatisfiable,
    new,
    waiting_for_pod_group,
)

__all__ = [
    "NAME",
    "PERMIT_TIMEOUT_SECONDS",
    "WAITING_FOR_MIN_COUNT_PODS",
    "WAITING_FOR_MIN_COUNT_SCHEDULED",
    "Args",
    "GangScheduling",
    "min_count_not_yet_satisfied",
    "min_count_unsatisfiable",
    "new",
    "waiting_for_pod_group",
]
