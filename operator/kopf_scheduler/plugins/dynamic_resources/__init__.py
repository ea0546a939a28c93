"""DynamicResources: pods with ResourceClaims are placed where devices of the ResourceSlices that DRA
drivers publish can be allocated to them, and the scheduler writes the allocations (see ``plugin``)."""

from kopf_scheduler.plugins.dynamic_resources.args import Args
from kopf_scheduler.plugins.dynamic_resources.plugin import (
    CANNOT_ALLOCATE,
    DEALLOCATED,
    NAME,
    NO_NEW_CLAIMS,
    NOT_AVAILABLE,
    STATE_NOT_FOUND,
    STILL_NOT_SCHEDULABLE,
    DynamicResources,
    new,
)

__all__ = [
    "CANNOT_ALLOCATE",
    "DEALLOCATED",
    "NAME",
    "NOT_AVAILABLE",
    "NO_NEW_CLAIMS",
    "STATE_NOT_FOUND",
    "STILL_NOT_SCHEDULABLE",
    "Args",
    "DynamicResources",
    "new",
]
