"""The e2e tier's control plane: one real etcd + kube-apiserver per test session.

``control_plane`` starts it once (state in a temporary directory), yields a `ClusterHarness` (kubeconfig,
server, token, CA file and blocking HTTP helpers), and stops every process at the end of the session, also
when the session is interrupted; the components are additionally tied to this process
(PR_SET_PDEATHSIG), so even a killed pytest leaves nothing running. A control plane that does not come up
fails the tests that need it, with the failing component's log tail; it never skips them.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator

import pytest

from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import default_crds_dir
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.errors import UsageError


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    state_dir = tmp_path_factory.mktemp("dev-cluster")
    cluster = DevCluster(state_dir, crds_dir=default_crds_dir(), die_with_parent=True)
    atexit.register(cluster.down)  # in case the session ends without running finalizers
    try:
        try:
            cluster.up()
        except UsageError as e:  # binaries missing: `make controlplane` was not run
            pytest.fail(f"control plane not available: {e}", pytrace=False)
        except Exception as e:  # ClusterError carries the failing component's log tail
            pytest.fail(f"control plane did not come up: {e}", pytrace=False)
        yield ClusterHarness.of(cluster)
    finally:
        cluster.down()
        atexit.unregister(cluster.down)
