"""PodTopologySpread: hard topology spread constraints filter nodes, soft ones score them."""

from kopf_scheduler.plugins.pod_topology_spread.args import Args
from kopf_scheduler.plugins.pod_topology_spread.constraints import DefaultSelectorFn, no_default_selector
from kopf_scheduler.plugins.pod_topology_spread.filtering import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from kopf_scheduler.plugins.pod_topology_spread.plugin import NAME, PodTopologySpread, new

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "Args",
    "DefaultSelectorFn",
    "PodTopologySpread",
    "new",
    "no_default_selector",
]
