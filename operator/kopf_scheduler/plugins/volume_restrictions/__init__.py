"""VolumeRestrictions: in-tree disks a pod would share with the node's pods, and ReadWriteOncePod claims
another pod already uses."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.volume_restrictions.plugin import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    NAME,
    VolumeRestrictions,
    new,
)

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT",
    "NAME",
    "Args",
    "VolumeRestrictions",
    "new",
]
