"""The only code that talks to the API server: connection and credentials, binding, preemption, events,
pod status, leader election, and a few reads and status patches for the operator.

Requests go over one pool of keep-alive HTTP/1.1 connections (``http_pool``); ``kubernetes.config``
is used only to run kubeconfig exec and auth-provider credential plugins. Nothing here imports kopf.
"""

from kopf_scheduler.k8s.client import KubeClient, parse_resource
from kopf_scheduler.k8s.connection import ConfigError, ConnectionInfo, in_cluster, load_connection
from kopf_scheduler.k8s.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from kopf_scheduler.k8s.rest import Response, RestClient, resource_path
from kopf_scheduler.k8s.stats import ClientStats

__all__ = [
    "ClientStats",
    "ConfigError",
    "ConnectionInfo",
    "KubeClient",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeadershipLost",
    "Response",
    "RestClient",
    "in_cluster",
    "load_connection",
    "parse_resource",
    "resource_path",
]
