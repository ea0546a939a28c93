"""Coscheduling: gang scheduling over scheduler-plugins' PodGroup API (``scheduling.x-k8s.io/v1alpha1``).
Not in the default profile; ``profiles/gang-scheduling.yaml`` enables it."""

from kopf_scheduler.plugins.coscheduling.args import Args
from kopf_scheduler.plugins.coscheduling.groups import (
    PermitOutcome,
    PodGroupManager,
    format_resources,
    resource_gap,
    sibling_pods_message,
)
from kopf_scheduler.plugins.coscheduling.plugin import (
    CANNOT_FIND_POD_GROUP,
    DEFAULT_WAIT_SECONDS,
    NAME,
    POD_GROUP_NOT_FOUND,
    REJECTED_IN_POST_FILTER,
    REJECTED_IN_UNRESERVE,
    Coscheduling,
    gang_rejected_message,
    new,
)

__all__ = [
    "CANNOT_FIND_POD_GROUP",
    "DEFAULT_WAIT_SECONDS",
    "NAME",
    "POD_GROUP_NOT_FOUND",
    "REJECTED_IN_POST_FILTER",
    "REJECTED_IN_UNRESERVE",
    "Args",
    "Coscheduling",
    "PermitOutcome",
    "PodGroupManager",
    "format_resources",
    "gang_rejected_message",
    "new",
    "resource_gap",
    "sibling_pods_message",
]
