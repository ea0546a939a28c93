"""NodePorts: the host ports a pod asks for must be free on the node (``nodeports/node_ports.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.node_ports.plugin import ERR_REASON, NAME, NodePorts, new

__all__ = ["ERR_REASON", "NAME", "Args", "NodePorts", "new"]
