"""A scheduler with the default profile over an in-memory cluster, for DefaultPreemption tests: its
framework is the plugin's handle, so filters, pre-filter extensions and nominations are the real ones."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from kopf_scheduler.api.feature_gates import BINARY_VERSION, FeatureGates
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.diagnosis import FitError
from kopf_scheduler.framework.eager import run_eagerly
from kopf_scheduler.framework.interface import PostFilterResult
from kopf_scheduler.framework.objects.kind import ObjectKind
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.status import Status
from kopf_scheduler.plugins.default_preemption import DefaultPreemption
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.scheduling.schedule_one import schedule_pod
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.simulate.client import SimulatedCluster
from kopf_scheduler.testing import make_node

PROFILE = "default-scheduler"
#: pods without ``status.startTime`` count as starting at this wall-clock time
NOW = 2_000_000_000.0


def node(name: str, cpu: str = "2", pods: int = 110, **labels: str) -> dict[str, Any]:
    builder = make_node().name(name).capacity(cpu=cpu, memory="8Gi", pods=pods)
    for key, value in labels.items():
        builder = builder.label(key, value)
    return builder.obj()


class Harness:
    def __init__(
        self,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]] = (),
        pdbs: Iterable[Mapping[str, Any]] = (),
        args: Mapping[str, Any] | None = None,
        seed: int = 1,
        gates: Mapping[str, bool] | None = None,
        objects: Iterable[tuple[ObjectKind[Any], Mapping[str, Any]]] = (),
    ) -> None:
        """``gates``: feature gates set (GenericWorkload also keeps pod groups); ``objects``: what the
        scheduler sees before the pods (e.g. PodGroups)."""
        self.cluster = SimulatedCluster()
        self.sched = Scheduler(self.cluster, clock=VirtualClock(), rng=random.Random(seed))
        if gates:
            resolved = FeatureGates.resolve(BINARY_VERSION, dict(gates))
            self.sched.feature_gates = resolved
            self.sched.defaults = default_plugins(resolved)
            self.sched.use_pod_groups(resolved.enabled("GenericWorkload"))
        spec = ProfileSpec(scheduler_name=PROFILE)
        if args is not None:
            spec = ProfileSpec(
                scheduler_name=PROFILE,
                plugin_config={"DefaultPreemption": (dict(args), "spec.pluginConfig[0].args")},
            )
        self.sched.set_profile(spec)
        self.cluster.on_update = self.sched.update_pod
        self.cluster.on_delete = self.sched.delete_pod
        for obj in pdbs:
            self.sched.add_pdb(obj)
        for obj in nodes:
            self.sched.add_node(obj)
        for kind, raw in objects:
            self.sched.update_object(kind, raw)
        for obj in pods:
            self.cluster.pods[obj["metadata"]["uid"]] = dict(obj)
            self.sched.add_pod(obj)
        self.refresh()

    @property
    def framework(self) -> Framework:
        return self.sched.profiles[PROFILE]

    @property
    def plugin(self) -> DefaultPreemption:
        plugin = self.framework.plugins["DefaultPreemption"]
        assert isinstance(plugin, DefaultPreemption)
        plugin.wall = lambda: NOW
        return plugin

    def refresh(self) -> None:
        self.sched.cache.update_snapshot(self.sched.snapshot)
        self.framework.current_snapshot = self.sched.snapshot

    def pre_filtered(self, pod: PodInfo) -> CycleState:
        state = CycleState()
        _, status, _ = self.framework.run_pre_filter(state, pod, self.sched.snapshot.node_infos)
        assert status is None, status
        return state

    def fail(self, pod: PodInfo) -> tuple[CycleState, FitError]:
        """Runs the scheduling algorithm, which must find no node; returns the state and the FitError."""
        self.refresh()
        state = CycleState()
        try:
            run_eagerly(schedule_pod(self.sched, self.framework, state, pod))
        except FitError as e:
            return state, e
        raise AssertionError(f"{pod.key} fits somewhere")

    def post_filter(self, pod: PodInfo) -> tuple[PostFilterResult | None, Status | None]:
        state, fit_error = self.fail(pod)
        statuses = fit_error.diagnosis.node_statuses
        assert statuses is not None
        return self.plugin.post_filter(state, pod, statuses)
