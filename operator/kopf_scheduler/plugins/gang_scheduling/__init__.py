"""GangScheduling: kube-scheduler v1.37's gang scheduling over the Workload API's PodGroups
(``scheduling.k8s.io/v1beta1``, feature gate GenericWorkload).

Not in the registry yet: upstream schedules a gang's pods in one pod group scheduling cycle (queued as one
entity, ``PlacementFeasible`` checked after each pod, the PodGroup's ``PodGroupInitiallyScheduled`` condition
written), and kopf-scheduler has no such cycle; run per pod, the plugin would keep a gang that cannot fit
waiting at Permit for five minutes where kube-scheduler rejects it at once. It comes into the registry and,
with the gate on, the default profile with that cycle.
"""

from kopf_scheduler.plugins.gang_scheduling.plugin import (
    NAME,
    PERMIT_TIMEOUT_SECONDS,
    WAITING_FOR_MIN_COUNT_PODS,
    WAITING_FOR_MIN_COUNT_SCHEDULED,
    GangScheduling,
    min_count_not_yet_satisfied,
    min_count_unsatisfiable,
    waiting_for_pod_group,
)

__all__ = [
    "NAME",
    "PERMIT_TIMEOUT_SECONDS",
    "WAITING_FOR_MIN_COUNT_PODS",
    "WAITING_FOR_MIN_COUNT_SCHEDULED",
    "GangScheduling",
    "min_count_not_yet_satisfied",
    "min_count_unsatisfiable",
    "waiting_for_pod_group",
]
