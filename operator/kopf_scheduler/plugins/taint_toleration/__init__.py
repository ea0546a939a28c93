"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; untolerated PreferNoSchedule taints
lower a node's score."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.taint_toleration.plugin import (
    ERR_REASON_UNTOLERATED,
    NAME,
    TaintToleration,
    new,
)

__all__ = ["ERR_REASON_UNTOLERATED", "NAME", "Args", "TaintToleration", "new"]
