"""VolumeZone: the zone and region labels of a pod's bound PersistentVolumes must match the node's."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.volume_zone.plugin import ERR_REASON_CONFLICT, NAME, VolumeZone, new

__all__ = ["ERR_REASON_CONFLICT", "NAME", "Args", "VolumeZone", "new"]
