"""The same cluster under kube-scheduler, then under kopf-scheduler: each scheduler gets a fresh control
plane of its own with identical nodes and objects (one after the other, so the two never share the
machine's cores), the same run is made on both, and what each cluster recorded is handed to the tests to
compare.

A module says what it compares with a ``SideBySide`` named ``SIDE_BY_SIDE``: how to make its cluster,
the run, and how each scheduler is configured. The module fixtures ``kube_scheduler`` and
``kopf_scheduler`` (``tests/e2e/conftest.py``) make the run once per module under each scheduler and
return what ``run`` returned; the cluster is gone by then. A run that fails an assertion fails the
fixture with the scheduler's log tail; kopf-scheduler (``kopf-scheduler run``, started as users start
it, leading before the run begins) must log no ERROR line or traceback and stop within its grace period.
With ``fault_proxy``, each scheduler reaches the API server through a ``FaultProxy`` of its cluster
(``Scheduler.proxy``), so a run can break chosen requests of the scheduler's (its bindings, its claim
writes) the same way under both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

import pytest
from operator_harness import Operators

from kopf_scheduler.devcluster.fault_proxy import FaultProxy
from kopf_scheduler.devcluster.harness import ClusterHarness

T = TypeVar("T")

KUBE_SCHEDULER = "kube-scheduler"
KOPF_SCHEDULER = "kopf-scheduler"


@dataclass(frozen=True)
class Scheduler:
    """The scheduler a run is made under, as the run sees it."""

    name: str  # KUBE_SCHEDULER or KOPF_SCHEDULER
    #: its /metrics (kube-scheduler's secure port; kopf-scheduler's with ``kopf_ports``, else "")
    metrics_url: str
    #: stops it before the run ends (the rest of the run goes on without a scheduler)
    stop: Callable[[], object]
    #: what kopf-scheduler has logged so far ("" for kube-scheduler)
    log: Callable[[], str] = str
    #: the proxy between the scheduler and the API server (``SideBySide.fault_proxy``), else None
    proxy: FaultProxy | None = None


@dataclass(frozen=True)
class SideBySide(Generic[T]):
    """What a module compares; see the module docstring."""

    #: names the runs' state directories
    name: str
    #: a fresh cluster in the given state directory, stopped on exit (``operator_harness.fresh_cluster``)
    cluster: Callable[[Path], contextlib.AbstractContextManager[ClusterHarness]]
    #: the run, the same under both schedulers; what it returns is what the tests compare
    run: Callable[[ClusterHarness, Scheduler], T]
    #: kube-scheduler's KubeSchedulerConfiguration fields (``profiles``, ...); None: its defaults
    kube_config: Mapping[str, Any] | None = None
    #: kube-scheduler's flags besides its configuration file (``--feature-gates=...``)
    kube_args: Sequence[str] = ()
    #: the arguments of ``kopf-scheduler run``; by default it serves the pods of ``default-scheduler``
    kopf_args: Sequence[str] = ("--default-scheduler-name", "default-scheduler")
    #: whether kopf-scheduler serves its metrics (``Scheduler.metrics_url``)
    kopf_ports: bool = False
    #: after kopf-scheduler leads, before the run: what users would apply first (SchedulingProfiles)
    kopf_setup: Callable[[ClusterHarness, pytest.FixtureRequest], object] | None = None
    #: log lines shown with a failed run
    log_lines: int = 150
    #: the scheduler (only it) talks to the API server through a ``FaultProxy`` (``Scheduler.proxy``)
    fault_proxy: bool = False


def of(module: ModuleType) -> SideBySide[Any]:
    """The module's ``SIDE_BY_SIDE``."""
    spec = getattr(module, "SIDE_BY_SIDE", None)
    if not isinstance(spec, SideBySide):
        pytest.fail(f"{module.__name__} uses kube_scheduler/kopf_scheduler but declares no SIDE_BY_SIDE")
    return spec


@contextlib.contextmanager
def _proxy(spec: SideBySide[Any], cp: ClusterHarness) -> Iterator[FaultProxy | None]:
    if not spec.fault_proxy:
        yield None
        return
    # authorize: kube-scheduler, a Go client, sends no token to an http:// server
    with FaultProxy.of(cp.cluster, authorize=True) as proxy:
        yield proxy


def under_kube_scheduler(spec: SideBySide[T], workdir: Path) -> T:
    """``spec.run`` on a fresh cluster scheduled by the upstream kube-scheduler."""
    with spec.cluster(workdir / "cluster") as cp, _proxy(spec, cp) as proxy:
        config = dict(spec.kube_config or {})
        if proxy is not None:  # the client settings of devcluster's scheduler_config, another kubeconfig
            kubeconfig = proxy.kubeconfig(workdir / "proxy.kubeconfig")
            config["clientConnection"] = {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000}
        cp.cluster.start_kube_scheduler(list(spec.kube_args), config=config or None)
        scheduler = Scheduler(
            KUBE_SCHEDULER,
            f"{cp.cluster.urls[KUBE_SCHEDULER]}/metrics",
            cp.cluster.stop_kube_scheduler,
            proxy=proxy,
        )
        try:
            return spec.run(cp, scheduler)
        except AssertionError as e:
            tail = cp.cluster.log_tail(KUBE_SCHEDULER, spec.log_lines)
            raise AssertionError(f"{e}\nkube-scheduler log:\n{tail}") from None


def under_kopf_scheduler(spec: SideBySide[T], workdir: Path, request: pytest.FixtureRequest) -> T:
    """``spec.run`` on an identical fresh cluster scheduled by ``kopf-scheduler run``."""
    with spec.cluster(workdir / "cluster") as cp, _proxy(spec, cp) as proxy:
        operators = Operators(cp.kubeconfig, workdir)
        try:
            operator = operators.start(
                "op",
                lease_namespace="default",
                ports=spec.kopf_ports,
                args=list(spec.kopf_args),
                kubeconfig=None if proxy is None else proxy.kubeconfig(workdir / "proxy.kubeconfig"),
            )
            operator.wait_leading()
            if spec.kopf_setup is not None:
                spec.kopf_setup(cp, request)
            metrics = f"http://127.0.0.1:{operator.metrics_port}/metrics" if spec.kopf_ports else ""
            scheduler = Scheduler(KOPF_SCHEDULER, metrics, operators.stop_all, operator.log, proxy)
            try:
                result = spec.run(cp, scheduler)
            except AssertionError as e:
                raise AssertionError(f"{e}\noperator log:\n{operator.tail(spec.log_lines)}") from None
            assert not operator.problems(), operator.problems()
        finally:
            killed = operators.stop_all()
        assert not killed, f"operator still running 15 s after SIGTERM:\n{operator.tail()}"
        return result
