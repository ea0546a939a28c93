"""The e2e tier's control plane: one real etcd + kube-apiserver per test session.

``control_plane`` starts it once (state in a temporary directory), yields a `ClusterHarness` (kubeconfig,
server, token, CA file and blocking HTTP helpers), and stops every process at the end of the session, also
when the session is interrupted; the components are additionally tied to this process
(PR_SET_PDEATHSIG), so even a killed pytest leaves nothing running. A control plane that does not come up
fails the tests that need it, with the failing component's log tail; it never skips them.
"""

from __future__ import annotations

import atexit
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from operator_harness import OPERATORS_KEY, Operators, Scope

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


# -- the operator as users run it (tests/e2e/test_operator_*.py) -------------------------------------------


@pytest.fixture
def operators(
    control_plane: ClusterHarness, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Operators]:
    """Starts ``kopf-scheduler run`` subprocesses against the session's cluster; stops every one at the end
    (SIGTERM; one still running after the grace period is aborted and makes the test an error). Their
    logs are attached to the report of a failed test."""
    started = Operators(control_plane.kubeconfig, tmp_path)
    request.node.stash[OPERATORS_KEY] = started
    try:
        yield started
    finally:
        killed = started.stop_all()
    if killed:  # Kubernetes would SIGKILL it after the grace period too, but it should stop by itself
        pytest.fail(f"operator(s) {', '.join(killed)} still running 15 s after SIGTERM (stacks in the log)")


@pytest.fixture
def scope(control_plane: ClusterHarness) -> Iterator[Scope]:
    """This test's namespace, node label and unique names; deletes its pods, nodes and profiles after."""
    made = Scope(control_plane)
    try:
        yield made
    finally:
        made.cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    operators = item.stash.get(OPERATORS_KEY, None)
    if operators is not None and report.failed:
        for title, text in operators.report():
            report.sections.append((title, text))
    return report
