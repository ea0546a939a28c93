"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods that tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (``nodeunschedulable/node_unschedulable.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.node_unschedulable.plugin import (
    ERR_REASON_UNSCHEDULABLE,
    NAME,
    NodeUnschedulable,
    new,
)

__all__ = ["ERR_REASON_UNSCHEDULABLE", "NAME", "Args", "NodeUnschedulable", "new"]
