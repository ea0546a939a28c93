"""NodeResourcesBalancedAllocation: favours nodes whose resource usage fractions stay balanced."""

from kopf_scheduler.plugins.node_resources_balanced_allocation.args import Args, ResourceSpec
from kopf_scheduler.plugins.node_resources_balanced_allocation.plugin import (
    NAME,
    NodeResourcesBalancedAllocation,
    balanced_score,
    new,
)

__all__ = ["NAME", "Args", "NodeResourcesBalancedAllocation", "ResourceSpec", "balanced_score", "new"]
