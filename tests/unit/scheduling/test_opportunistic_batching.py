"""Opportunistic batching through whole scheduling cycles, scenario by scenario as upstream's
integration test ``test/integration/scheduler/batch/batch_test.go`` (v1.37.2, ``TestBatchScenarios``) runs
them: the default profile with PodTopologySpread's default constraints cleared (``defaultingType:
List``), a copy of it named ``mysched``, and copies with a filter that does not sign (``nosign``) or
signs no pod (``emptysign``). Each pod is created once the one before it is bound; the node it gets and
whether it was placed on a hinted node are compared with upstream's literals.

Then: under the default profile (PodTopologySpread's ``System`` defaulting) no pod is ever signed, so
nothing is batched and the metrics count only ``no_hint`` attempts and ``pod_not_batchable`` flushes; and
with the gate off, nothing is counted and the placements are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from fake_api import FakeAPI
from prometheus_client import CollectorRegistry

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import FilterPlugin, SignFragment, SignPlugin
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.registry import new_registry
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

DEFAULT = "default-scheduler"
LIST_DEFAULTING = [
    {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}},
]


class NoSign(FilterPlugin):
    name = "nosign"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None


class EmptySign(FilterPlugin, SignPlugin):
    name = "emptysign"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        return Status(Code.UNSCHEDULABLE)


def _plugin(cls: type) -> Any:
    return SimpleNamespace(NAME=cls.name, Args=NoArgs, new=lambda args, handle: cls())


@dataclass(frozen=True)
class PodDef:
    name: str
    expected_node: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    node_affinity: tuple[str, ...] = ()
    expect_batched: bool = False
    scheduler: str = DEFAULT
    expect_unschedulable: bool = False


@dataclass(frozen=True)
class NodeDef:
    name: str
    max_pods: int
    labels: dict[str, str] = field(default_factory=dict)


def _scheduler(
    gates: FeatureGates | None = None, plugin_config: list[Any] | None = None
) -> tuple[Scheduler, FakeAPI]:
    client = FakeAPI()
    registry = new_registry(autoload=False)
    registry.register("nosign", _plugin(NoSign))
    registry.register("emptysign", _plugin(EmptySign))
    scheduler = Scheduler(client, clock=VirtualClock(), registry=registry)
    if gates is not None:
        scheduler.feature_gates = gates
    config = LIST_DEFAULTING if plugin_config is None else plugin_config
    scheduler.set_profile(parse_profile({"schedulerName": DEFAULT, "pluginConfig": config}))
    scheduler.set_profile(parse_profile({"schedulerName": "mysched", "pluginConfig": config}))
    for extra in ("nosign", "emptysign"):
        scheduler.set_profile(
            parse_profile(
                {
                    "schedulerName": extra,
                    "pluginConfig": config,
                    "plugins": {"filter": {"enabled": [{"name": extra}]}},
                }
            )
        )
    return scheduler, client


def _pod(d: PodDef) -> dict[str, Any]:
    """Upstream's ``newPod``: 10 CPUs and 4 MiB, preferring the listed nodes by ``metadata.name`` with
    weights counting down to 1."""
    builder = make_pod().name(d.name).scheduler_name(d.scheduler).req(cpu="10", memory=str(4 * 1024 * 1024))
    if d.node_selector:
        builder = builder.node_selector(**d.node_selector)
    preferred = [
        {
            "weight": len(d.node_affinity) - i,
            "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]},
        }
        for i, node in enumerate(d.node_affinity)
    ]
    builder = builder.affinity(
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    )
    return builder.obj()


def _node(d: NodeDef) -> dict[str, Any]:
    builder = make_node().name(d.name).capacity(cpu="100", memory=str(4 * 1024**3), pods=d.max_pods)
    for key, value in d.labels.items():
        builder = builder.label(key, value)
    return builder.obj()


async def _run(scheduler: Scheduler, client: FakeAPI, pods: Sequence[PodDef]) -> list[tuple[str, bool]]:
    """Each pod's node ("" when it failed) and whether it went to a hinted node."""
    out = []
    for d in pods:
        batch = scheduler.profiles[d.scheduler].batch
        before = batch.batched_pods if batch is not None else 0
        scheduler.add_pod(_pod(d))
        qp = scheduler.queue.pop_nowait()
        assert qp is not None
        scheduler.schedule_one(qp)
        await scheduler.wait_for_bindings()
        node = dict(client.bound).get(f"default/{d.name}", "")
        out.append((node, (batch.batched_pods if batch is not None else 0) > before))
    return out


SCENARIOS: dict[str, tuple[list[PodDef], list[NodeDef]]] = {
    "one pod one node": (
        [PodDef("1ppn-batchp1", "1ppn-batchn1")],
        [NodeDef("1ppn-batchn1", 1)],
    ),
    "distinct pods on distinct nodes": (
        [
            PodDef("dpdn-batchp1", "dpdn-batchn1", node_selector={"forpod": "1"}),
            PodDef("dpdn-batchp2", "dpdn-batchn2", node_selector={"forpod": "2"}),
            PodDef("dpdn-batchp3", "dpdn-batchn3", node_selector={"forpod": "3"}),
        ],
        [
            NodeDef("dpdn-batchn3", 10, {"forpod": "3"}),
            NodeDef("dpdn-batchn2", 10, {"forpod": "2"}),
            NodeDef("dpdn-batchn1", 10, {"forpod": "1"}),
        ],
    ),
    "three pod batch": (
        [
            PodDef("tpb-batchp1", "tpb-batchn1", node_affinity=("tpb-batchn1", "tpb-batchn2", "tpb-batchn3")),
            PodDef("tpb-batchp2", "tpb-batchn2", node_affinity=("tpb-batchn1", "tpb-batchn2", "tpb-batchn3"),
                   expect_batched=True),
            PodDef("tpb-batchp3", "tpb-batchn3", node_affinity=("tpb-batchn1", "tpb-batchn2", "tpb-batchn3"),
                   expect_batched=True),
        ],
        [NodeDef("tpb-batchn3", 1), NodeDef("tpb-batchn2", 1), NodeDef("tpb-batchn1", 1)],
    ),
    "two consecutive batches": (
        [
            PodDef("tcb-batchp1", "tcb-batchn1", node_affinity=("tcb-batchn1", "tcb-batchn2")),
            PodDef("tcb-batchp2", "tcb-batchn2", node_affinity=("tcb-batchn1", "tcb-batchn2"),
                   expect_batched=True),
            PodDef("tcb-batchp3", "tcb-batchn4", node_affinity=("tcb-batchn4", "tcb-batchn3")),
            PodDef("tcb-batchp4", "tcb-batchn3", node_affinity=("tcb-batchn4", "tcb-batchn3"),
                   expect_batched=True),
        ],
        [NodeDef("tcb-batchn4", 1), NodeDef("tcb-batchn3", 1), NodeDef("tcb-batchn2", 1),
         NodeDef("tcb-batchn1", 1)],
    ),
    "rescoring enables batching for multiple pods per node": (
        [
            PodDef("mppn-batchp1", "mppn-batchn1", node_affinity=("mppn-batchn1", "mppn-batchn2")),
            PodDef("mppn-batchp2", "mppn-batchn1", node_affinity=("mppn-batchn1", "mppn-batchn2"),
                   expect_batched=True),
            PodDef("mppn-batchp3", "mppn-batchn4", node_affinity=("mppn-batchn4", "mppn-batchn3")),
            PodDef("mppn-batchp4", "mppn-batchn4", node_affinity=("mppn-batchn4", "mppn-batchn3"),
                   expect_batched=True),
        ],
        [NodeDef("mppn-batchn4", 2), NodeDef("mppn-batchn3", 2), NodeDef("mppn-batchn2", 2),
         NodeDef("mppn-batchn1", 2)],
    ),
    "rescoring falls back to next cached node when last chosen node is not feasible": (
        [
            PodDef("nfmb-batchp1", "nfmb-batchn1", node_affinity=("nfmb-batchn1", "nfmb-batchn2")),
            PodDef("nfmb-batchp2", "nfmb-batchn1", node_affinity=("nfmb-batchn1", "nfmb-batchn2"),
                   expect_batched=True),
            PodDef("nfmb-batchp3", "nfmb-batchn2", node_affinity=("nfmb-batchn1", "nfmb-batchn2"),
                   expect_batched=True),
        ],
        [NodeDef("nfmb-batchn1", 2), NodeDef("nfmb-batchn2", 2)],
    ),
    "no batching between schedulers": (
        [
            PodDef("bts--batchp1", "bts--batchn1",
                   node_affinity=("bts--batchn1", "bts--batchn2", "bts--batchn3")),
            PodDef("bts--batchp2", "bts--batchn2",
                   node_affinity=("bts--batchn1", "bts--batchn2", "bts--batchn3"), scheduler="mysched"),
        ],
        [NodeDef("bts--batchn3", 1), NodeDef("bts--batchn2", 1), NodeDef("bts--batchn1", 1)],
    ),
    "no batching missing sign": (
        [
            PodDef("nsg-batchp1", "nsg-batchn1", node_affinity=("nsg-batchn1", "nsg-batchn2", "nsg-batchn3"),
                   scheduler="nosign"),
            PodDef("nsg-batchp2", "nsg-batchn2", node_affinity=("nsg-batchn1", "nsg-batchn2", "nsg-batchn3"),
                   scheduler="nosign"),
        ],
        [NodeDef("nsg-batchn3", 1), NodeDef("nsg-batchn2", 1), NodeDef("nsg-batchn1", 1)],
    ),
    "no batching empty sign": (
        [
            PodDef("esg-batchp1", "esg-batchn1", node_affinity=("esg-batchn1", "esg-batchn2", "esg-batchn3"),
                   scheduler="emptysign"),
            PodDef("esg-batchp2", "esg-batchn2", node_affinity=("esg-batchn1", "esg-batchn2", "esg-batchn3"),
                   scheduler="emptysign"),
        ],
        [NodeDef("esg-batchn3", 1), NodeDef("esg-batchn2", 1), NodeDef("esg-batchn1", 1)],
    ),
    "unschedulable pod": (
        [PodDef("usp-batchp1", "usp-batchn1"), PodDef("usp-batchp2", expect_unschedulable=True)],
        [NodeDef("usp-batchn1", 1)],
    ),
}  # fmt: skip


@pytest.mark.parametrize(("pods", "nodes"), SCENARIOS.values(), ids=SCENARIOS.keys())
async def test_batch_scenarios(pods: list[PodDef], nodes: list[NodeDef]) -> None:
    scheduler, client = _scheduler()
    for node in nodes:
        scheduler.add_node(_node(node))
    got = await _run(scheduler, client, pods)
    assert got == [(d.expected_node, d.expect_batched) for d in pods]
    for d in pods:
        if d.expect_unschedulable:
            [failure] = [f for f in client.failures if f[0] == f"default/{d.name}"]
            assert failure[1] == "Unschedulable"


def _counts(metrics: SchedulerMetrics) -> dict[tuple[str, ...], float]:
    out = {}
    for family in metrics.registry.collect():
        if family.name in ("scheduler_batch_attempts", "scheduler_batch_cache_flushed"):
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    label = sample.labels.get("result") or sample.labels.get("reason")
                    out[(sample.name, sample.labels["profile"], label)] = sample.value
    return out


THREE_POD_BATCH = SCENARIOS["three pod batch"]


async def test_under_the_default_profile_no_pod_is_batched() -> None:
    """PodTopologySpread's System defaulting gives it default constraints: it signs no pod, so every
    attempt is counted ``no_hint`` and every stored result flushed as ``pod_not_batchable``."""
    scheduler, client = _scheduler(plugin_config=[])
    metrics = SchedulerMetrics(CollectorRegistry())
    metrics.attach(scheduler)
    pods, nodes = THREE_POD_BATCH
    for node in nodes:
        scheduler.add_node(_node(node))
    assert scheduler.profiles[DEFAULT].batch is not None
    got = await _run(scheduler, client, pods)
    assert got == [("tpb-batchn1", False), ("tpb-batchn2", False), ("tpb-batchn3", False)]
    assert _counts(metrics) == {
        ("scheduler_batch_attempts_total", DEFAULT, "no_hint"): 3.0,
        # the third pod had one node left: nothing else scored, an empty list
        ("scheduler_batch_cache_flushed_total", DEFAULT, "pod_not_batchable"): 2.0,
        ("scheduler_batch_cache_flushed_total", DEFAULT, "empty_list"): 1.0,
    }


async def test_the_batched_run_counts_hints_used() -> None:
    scheduler, client = _scheduler()
    metrics = SchedulerMetrics(CollectorRegistry())
    metrics.attach(scheduler)
    pods, nodes = THREE_POD_BATCH
    for node in nodes:
        scheduler.add_node(_node(node))
    await _run(scheduler, client, pods)
    assert _counts(metrics) == {
        ("scheduler_batch_attempts_total", DEFAULT, "no_hint"): 1.0,
        ("scheduler_batch_attempts_total", DEFAULT, "hint_used"): 2.0,
    }


@pytest.mark.parametrize("name", ["three pod batch", "rescoring enables batching for multiple pods per node"])
async def test_with_the_gate_off_nothing_is_batched_or_counted(name: str) -> None:
    scheduler, client = _scheduler(FeatureGates.resolve((1, 37), {"OpportunisticBatching": False}))
    metrics = SchedulerMetrics(CollectorRegistry())
    metrics.attach(scheduler)
    pods, nodes = SCENARIOS[name]
    for node in nodes:
        scheduler.add_node(_node(node))
    assert scheduler.profiles[DEFAULT].batch is None
    got = await _run(scheduler, client, pods)
    assert got == [(d.expected_node, False) for d in pods]
    assert _counts(metrics) == {}


@pytest.mark.parametrize(("gate", "second"), [(True, "y-5"), (False, "x-4")], ids=["batched", "gate off"])
async def test_a_batched_pod_follows_the_order_normalised_for_the_pod_before_it(
    gate: bool, second: str
) -> None:
    """The pair of ``tests/e2e/test_batching_vs_kube_scheduler.py`` (kube-scheduler v1.37.2 puts the second
    on ``y-5``): NodeAffinity's scores the first pod got were normalised against ``c-3``, where it went, and
    rank ``y-5`` above ``x-4``; scored afresh without ``c-3``, ``x-4`` comes first."""
    scheduler, client = _scheduler(FeatureGates.resolve((1, 37), {"OpportunisticBatching": gate}))
    for name, cpu in (("c-3", "1"), ("x-4", "2"), ("y-5", "8")):
        scheduler.add_node(make_node().name(name).capacity(cpu=cpu, memory="16Gi", pods=110).obj())
    preferred = [
        {
            "weight": weight,
            "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]},
        }
        for n, weight in (("c-3", 100), ("x-4", 10))
    ]
    for name in ("pair-0", "pair-1"):
        pod = make_pod().name(name).scheduler_name(DEFAULT).req(cpu="1", memory="256Mi")
        scheduler.add_pod(
            pod.affinity(
                {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
            ).obj()
        )
        qp = scheduler.queue.pop_nowait()
        assert qp is not None
        scheduler.schedule_one(qp)
        await scheduler.wait_for_bindings()
    assert client.bound == [("default/pair-0", "c-3"), ("default/pair-1", second)]
