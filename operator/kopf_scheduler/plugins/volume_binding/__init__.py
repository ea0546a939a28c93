"""VolumeBinding: pods with PersistentVolumeClaims go where their volumes are or can be made; the
scheduler binds WaitForFirstConsumer claims (static volumes or provisioning on the chosen node) before
it binds the pod."""

from kopf_scheduler.plugins.volume_binding.args import Args
from kopf_scheduler.plugins.volume_binding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from kopf_scheduler.plugins.volume_binding.plugin import NAME, UNBOUND_IMMEDIATE_CLAIMS, VolumeBinding, new

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "NAME",
    "UNBOUND_IMMEDIATE_CLAIMS",
    "Args",
    "VolumeBinding",
    "new",
]
