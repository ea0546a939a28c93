"""The e2e tier's control planes: real etcd + kube-apiserver, started at most once per test session.

``control_plane`` (etcd + kube-apiserver only) and ``controller_plane`` (the same plus
kube-controller-manager, in its own state directory) each start on first use (state in a temporary
directory), yield a `ClusterHarness` (kubeconfig, server, token, CA file and blocking HTTP helpers), and
stop every process at the end of the session, also when the session is interrupted; the components are
additionally tied to this process (PR_SET_PDEATHSIG), so even a killed pytest leaves nothing running. A
control plane that does not come up fails the tests that need it, with the failing component's log tail;
it never skips them.

``kube_scheduler`` and ``kopf_scheduler`` (module scope) run a module's ``SIDE_BY_SIDE`` comparison
(``side_by_side.py``): the same fresh cluster and run under the upstream kube-scheduler, then under
``kopf-scheduler run``.

``control_plane`` has no controller manager on purpose: its tests write PDB status by hand (the disruption
controller would overwrite it) and arrange pods and nodes that no controller should touch (the pod
garbage collector, for one, deletes pods bound to nodes that do not exist).

Sessions on one machine run one after another (an exclusive lock on ``$KOPF_SCHEDULER_E2E_LOCK``, default
``/tmp/kopf-scheduler-e2e.lock``, held for the whole session): two sessions' control planes and schedulers
competing for the same cores turn every timing assertion into a coin toss.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import side_by_side
from operator_harness import OPERATORS_KEY, Operators, Scope

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import default_crds_dir
from kopf_scheduler.devcluster.harness import ClusterHarness

_LOCK_KEY = pytest.StashKey[object]()


def pytest_sessionstart(session: pytest.Session) -> None:
    lock_path = os.environ.get("KOPF_SCHEDULER_E2E_LOCK", "/tmp/kopf-scheduler-e2e.lock")
    # Not closed: the lock is held until the process exits.
    lock = open(lock_path, "a")  # noqa: SIM115
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"e2e: waiting for another e2e session ({lock_path})", file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    session.config.stash[_LOCK_KEY] = lock


def _session_cluster(state_dir: Path, *, with_controller_manager: bool = False) -> Iterator[ClusterHarness]:
    cluster = DevCluster(
        state_dir,
        crds_dir=default_crds_dir(),
        die_with_parent=True,
        with_controller_manager=with_controller_manager,
    )
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


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    """etcd + kube-apiserver: nothing acts on the objects but the schedulers under test."""
    yield from _session_cluster(tmp_path_factory.mktemp("dev-cluster"))


@pytest.fixture(scope="session")
def controller_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    """A second cluster with kube-controller-manager: Deployments get ReplicaSets and pods, owners'
    deletion is garbage-collected, PDBs get status. Started only by sessions that use it."""
    yield from _session_cluster(
        tmp_path_factory.mktemp("dev-cluster-controllers"), with_controller_manager=True
    )


# -- the operator as users run it (tests/e2e/test_operator_*.py) -------------------------------------------


@pytest.fixture
def operators(
    control_plane: ClusterHarness, scope: Scope, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Operators]:
    """Starts ``kopf-scheduler run`` subprocesses against the session's cluster; stops every one at the end
    (SIGTERM; one still running after the grace period is aborted and makes the test an error). Their
    logs are attached to the report of a failed test. They are stopped before the test's ``scope`` is
    cleaned up (it is set up first), so that no operator recreates its Lease or acts on what is being
    deleted."""
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
    """This test's namespace, node label and unique names; deletes its pods, budgets, leases, nodes,
    profiles and whatever else it registered after (``Scope.cleanup``), also when the test failed."""
    made = Scope(control_plane)
    try:
        yield made
    finally:
        made.cleanup()


# -- the same cluster under kube-scheduler, then under kopf-scheduler (side_by_side.py) ----------------------


@pytest.fixture(scope="module")
def kube_scheduler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the module's ``SIDE_BY_SIDE`` run recorded under the upstream kube-scheduler."""
    spec = side_by_side.of(request.module)
    return side_by_side.under_kube_scheduler(spec, tmp_path_factory.mktemp(f"{spec.name}-kube-scheduler"))


@pytest.fixture(scope="module")
def kopf_scheduler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """What the same run recorded on an identical fresh cluster under ``kopf-scheduler run``."""
    spec = side_by_side.of(request.module)
    workdir = tmp_path_factory.mktemp(f"{spec.name}-kopf-scheduler")
    return side_by_side.under_kopf_scheduler(spec, workdir, request)


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
