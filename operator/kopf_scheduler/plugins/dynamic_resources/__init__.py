"""DynamicResources: pods with ResourceClaims are placed where devices of the ResourceSlices that DRA
drivers publish can be allocated to them, and the scheduler writes the allocations (see ``plugin``)."""

from kopf_scheduler.plugins.dynamic_resources.args import Args
from kopf_scheduler.plugins.dynamic_resources.plugin import (
    CANNOT_ALLOCATE,
    DEALLOCATED,
    NAME,
    NOT_AVAILABLE,
    STATE_NOT_FOUND,
    DynamicResources,
    new,
)

__all__ = [
    "CANNOT_ALLOCATE",
    "DEALLOCATED",
    "NAME",
    "NOT_AVAILABLE",
    "STATE_NOT_FOUND",
    "Args",
    "DynamicResources",
    "new",
]
