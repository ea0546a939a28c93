"""NodeResourcesFit: resource requests against node allocatable; LeastAllocated, MostAllocated or
RequestedToCapacityRatio scoring."""

from kopf_scheduler.plugins.node_resources_fit.args import Args
from kopf_scheduler.plugins.node_resources_fit.plugin import (
    NAME,
    TOO_MANY_PODS,
    NodeResourcesFit,
    insufficient,
    new,
)

__all__ = ["NAME", "TOO_MANY_PODS", "Args", "NodeResourcesFit", "insufficient", "new"]
