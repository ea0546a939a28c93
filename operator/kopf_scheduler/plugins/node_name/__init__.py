"""NodeName: a pod that names a node in ``spec.nodeName`` fits only there (``nodename/node_name.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.node_name.plugin import ERR_REASON, NAME, NodeName, new

__all__ = ["ERR_REASON", "NAME", "Args", "NodeName", "new"]
