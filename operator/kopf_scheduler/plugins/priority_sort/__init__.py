"""PrioritySort: higher priority first, then the earlier queue timestamp (``queuesort/priority_sort.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.priority_sort.plugin import NAME, PrioritySort, new

__all__ = ["NAME", "Args", "PrioritySort", "new"]
