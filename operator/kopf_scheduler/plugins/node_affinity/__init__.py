"""NodeAffinity: ``nodeSelector``, required and preferred node affinity, and the profile's
``addedAffinity``."""

from kopf_scheduler.plugins.node_affinity.args import Args
from kopf_scheduler.plugins.node_affinity.plugin import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NAME,
    NodeAffinity,
    new,
)

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_ENFORCED",
    "ERR_REASON_POD",
    "NAME",
    "Args",
    "NodeAffinity",
    "new",
]
