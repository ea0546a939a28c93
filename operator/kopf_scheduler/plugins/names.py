"""Every in-tree plugin name: kube-scheduler's names, since the semantics match."""

PRIORITY_SORT = "PrioritySort"
SCHEDULING_GATES = "SchedulingGates"
NODE_NAME = "NodeName"
NODE_UNSCHEDULABLE = "NodeUnschedulable"
NODE_RESOURCES_FIT = "NodeResourcesFit"
DEFAULT_BINDER = "DefaultBinder"
