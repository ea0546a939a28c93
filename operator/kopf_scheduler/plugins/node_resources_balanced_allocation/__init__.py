"""NodeResourcesBalancedAllocation: favours nodes whose balance of resource usage fractions the pod
improves."""

from kopf_scheduler.plugins.node_resources_balanced_allocation.args import Args, ResourceSpec
from kopf_scheduler.plugins.node_resources_balanced_allocation.plugin import (
    NAME,
    NodeResourcesBalancedAllocation,
    balance,
    balanced_score,
    new,
)

__all__ = [
    "NAME",
    "Args",
    "NodeResourcesBalancedAllocation",
    "ResourceSpec",
    "balance",
    "balanced_score",
    "new",
]
