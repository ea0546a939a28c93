"""Test helpers shipped with the package, so out-of-tree plugins can use them: fluent pod and node
builders, and a virtual clock (``kopf_scheduler.framework.clock.VirtualClock``)."""

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.testing.builders import NodeBuilder, PodBuilder, make_node, make_pod

__all__ = ["NodeBuilder", "PodBuilder", "VirtualClock", "make_node", "make_pod"]
