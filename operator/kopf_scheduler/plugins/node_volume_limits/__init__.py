"""NodeVolumeLimits: the CSI volumes a node attaches stay within its CSINode's per-driver counts."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.node_volume_limits.plugin import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NAME,
    NodeVolumeLimits,
    new,
)

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "NAME", "Args", "NodeVolumeLimits", "new"]
