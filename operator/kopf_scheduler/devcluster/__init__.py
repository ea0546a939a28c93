"""A local control plane for end-to-end tests and benchmarks: real etcd, kube-apiserver and (optionally)
the upstream kube-scheduler and kube-controller-manager, built by ``make controlplane`` and run on
loopback; plus fake nodes.

Python API::

    cluster = DevCluster(state_dir)      # attaches to a running cluster recorded there, if any
    cluster.up()                         # etcd + kube-apiserver, CRDs applied; returns when ready
    await create_nodes(cluster, 500)     # fake Ready nodes
    cluster.start_kube_scheduler()
    cluster.start_controller_manager()   # or DevCluster(..., with_controller_manager=True)
    cluster.down()
"""

from kopf_scheduler.devcluster.apiclient import ApiClient, Response
from kopf_scheduler.devcluster.binaries import BinariesNotFound, find_bin_dir
from kopf_scheduler.devcluster.cluster import ClusterError, DevCluster, default_state_dir
from kopf_scheduler.devcluster.nodes import NodeCreationError, NodesResult, create_nodes, node_body

__all__ = [
    "ApiClient",
    "BinariesNotFound",
    "ClusterError",
    "DevCluster",
    "NodeCreationError",
    "NodesResult",
    "Response",
    "create_nodes",
    "default_state_dir",
    "find_bin_dir",
    "node_body",
]
