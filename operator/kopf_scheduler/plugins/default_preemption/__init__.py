"""DefaultPreemption: a PostFilter plugin that evicts lower-priority pods so a pod that fits nowhere can
run, choosing the node that costs least (budgets, priorities, number of victims)."""

from kopf_scheduler.plugins.default_preemption.args import Args
from kopf_scheduler.plugins.default_preemption.plugin import (
    MESSAGE_PREFIX,
    NAME,
    NOT_ELIGIBLE_POLICY_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    DefaultPreemption,
    new,
)
from kopf_scheduler.plugins.default_preemption.victims import NO_VICTIMS

__all__ = [
    "MESSAGE_PREFIX",
    "NAME",
    "NOT_ELIGIBLE_POLICY_NEVER",
    "NOT_ELIGIBLE_TERMINATING",
    "NO_VICTIMS",
    "Args",
    "DefaultPreemption",
    "new",
]
