"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of the active queue
(``schedulinggates/scheduling_gates.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.scheduling_gates.plugin import NAME, SchedulingGates, new

__all__ = ["NAME", "Args", "SchedulingGates", "new"]
