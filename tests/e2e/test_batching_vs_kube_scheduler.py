"""Opportunistic batching (gate ``OpportunisticBatching``, on by default) under kube-scheduler v1.37.2 and
kopf-scheduler, on two identical fresh clusters, one after the other, with a profile under which pods are
signed: ``batching``, the default plugins with PodTopologySpread's default constraints cleared
(``defaultingType: List``). Under the default profile PodTopologySpread's System defaulting signs no pod,
and nothing is batched (``tests/unit/scheduling/test_opportunistic_batching.py``).

Phase one: three nodes with room for two pods each, six identical pods (1 CPU, preferring ``n-0`` over
``n-1`` over ``n-2`` by ``metadata.name`` at weights 3, 2, 1), created at once. The first is scored on every
node; the next ones take hints: the node the previous pod took is rescored while it has room, then the next
node remembered. The last pod finds one node left, which it takes without a hint.

Phase two, once the first six are bound (their nodes full): ``c-3`` (room for one pod), ``x-4`` (2 CPUs)
and ``y-5`` (8 CPUs) join, and two identical pods of 1 CPU preferring ``c-3`` at weight 100 and ``x-4`` at
weight 10 are created at once. The first takes ``c-3``. The second is offered the first one's order,
whose NodeAffinity scores were normalised against ``c-3``; a fresh scoring would rank them otherwise
(docs/architecture.md, "Opportunistic batching").

Phase three: two identical pods of ``plain``, a profile with the defaults (PodTopologySpread's System
defaulting), which signs no pod: neither is batched, each attempt counts ``no_hint`` and each stored
result is flushed as ``pod_not_batchable``.

Compared: every pod's node, and each profile's ``scheduler_batch_attempts_total``,
``scheduler_batch_cache_flushed_total`` and ``scheduler_batch_rescore_attempts_total`` read from each
scheduler's ``/metrics`` at the end.
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from operator_harness import fresh_cluster, kubectl, pod_outcome, sized_nodes, wait_profile, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.devcluster.nodes import node_body

pytestmark = pytest.mark.e2e

NS = "batching"
PROFILE = "batching"
PLAIN = "plain"
KUBE_PROFILES = [
    {
        "schedulerName": PROFILE,
        "pluginConfig": [
            {
                "name": "PodTopologySpread",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "PodTopologySpreadArgs",
                    "defaultingType": "List",
                },
            }
        ],
    },
    {"schedulerName": PLAIN},
]
SCHEDULING_PROFILE = f"""
apiVersion: kopf-scheduler.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: {PROFILE}
spec:
  schedulerName: {PROFILE}
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
---
apiVersion: kopf-scheduler.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: {PLAIN}
spec:
  schedulerName: {PLAIN}
"""
#: phase one: room for two pods each
NODES = {"n-0": (None, "8", "16Gi"), "n-1": (None, "8", "16Gi"), "n-2": (None, "8", "16Gi")}
RUN = [f"run-{i}" for i in range(6)]
#: phase two: name -> (CPUs, pods)
LATE_NODES = {"c-3": ("1", "110"), "x-4": ("2", "110"), "y-5": ("8", "110")}
PAIR = ["pair-0", "pair-1"]
PLAIN_PODS = ["plain-0", "plain-1"]
TIMEOUT = 60.0
METRICS = ("scheduler_batch_attempts_total", "scheduler_batch_cache_flushed_total",
           "scheduler_batch_rescore_attempts_total")  # fmt: skip


def _preferring(weights: dict[str, int]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": weight,
                    "preference": {
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]
                    },
                }
                for node, weight in weights.items()
            ]
        }
    }


def _pod(name: str, weights: dict[str, int], profile: str = PROFILE) -> dict[str, Any]:
    return pod_manifest(
        name,
        NS,
        requests={"cpu": "1", "memory": "256Mi"},
        schedulerName=profile,
        affinity=_preferring(weights),
    )


def nodes() -> list[dict[str, Any]]:
    bodies = sized_nodes(NODES)
    for body in bodies:
        for key in ("capacity", "allocatable"):
            body["status"][key]["pods"] = "2"
    return bodies


def late_nodes() -> list[dict[str, Any]]:
    bodies = []
    for index, (name, (cpu, pods)) in enumerate(LATE_NODES.items(), start=len(NODES)):
        resources = {"cpu": cpu, "memory": "16Gi", "pods": pods}
        body = node_body(index, prefix=name.split("-")[0] + "-", template={
            "status": {"capacity": resources, "allocatable": resources}
        })  # fmt: skip
        assert body["metadata"]["name"] == name
        bodies.append(body)
    return bodies


def batch_metrics(url: str) -> dict[str, dict[str, float]]:
    """Each profile's batch counters, ``name{label=value}`` -> value."""
    context = ssl._create_unverified_context()  # kube-scheduler's self-signed serving certificate
    with urllib.request.urlopen(url, timeout=10, context=context) as resp:
        text = resp.read().decode()
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line)
        if match is None or match.group(1) not in METRICS:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        profile = labels.pop("profile", "")
        key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        out.setdefault(profile, {})[f"{match.group(1)}{{{key}}}"] = float(match.group(3))
    return out


@dataclass(frozen=True)
class Run:
    placements: dict[str, str]
    metrics: dict[str, dict[str, float]]


def run(cp: ClusterHarness, scheduler: Scheduler) -> Run:
    placements: dict[str, str] = {}
    weights = {"n-0": 3, "n-1": 2, "n-2": 1}
    for name in RUN:
        cp.post(f"/api/v1/namespaces/{NS}/pods", _pod(name, weights))
    for name in RUN:
        placements[name] = wait_until(lambda name=name: pod_outcome(cp, NS, name), TIMEOUT, f"{name} placed")
    for body in late_nodes():
        cp.post("/api/v1/nodes", body)
    for name in PAIR:  # at once: the second comes within the 500 ms the first one's memory lasts
        cp.post(f"/api/v1/namespaces/{NS}/pods", _pod(name, {"c-3": 100, "x-4": 10}))
    for name in PAIR:
        placements[name] = wait_until(lambda name=name: pod_outcome(cp, NS, name), TIMEOUT, f"{name} placed")
    for name in PLAIN_PODS:
        cp.post(f"/api/v1/namespaces/{NS}/pods", _pod(name, {}, PLAIN))
        placements[name] = wait_until(lambda name=name: pod_outcome(cp, NS, name), TIMEOUT, f"{name} placed")
    return Run(placements, batch_metrics(scheduler.metrics_url))


def apply_profile(cp: ClusterHarness, request: pytest.FixtureRequest) -> None:
    kubectl(cp, "apply", "-f", "-", input=SCHEDULING_PROFILE)
    for name in (PROFILE, PLAIN):
        wait_profile(cp, name, "True", timeout=30.0)


#: kube-scheduler with the ``batching`` profile, then on an identical fresh cluster ``kopf-scheduler run``
#: with the same profile as a SchedulingProfile; both with their default gates (OpportunisticBatching on)
SIDE_BY_SIDE = SideBySide(
    "batching",
    lambda state_dir: fresh_cluster(state_dir, nodes(), namespaces=[NS]),
    run,
    kube_config={"profiles": KUBE_PROFILES},
    kopf_ports=True,
    kopf_setup=apply_profile,
)


def show(kube: Run, ours: Run) -> str:
    return (
        f"kube-scheduler:\n{yaml.safe_dump(kube.__dict__)}\nkopf-scheduler:\n{yaml.safe_dump(ours.__dict__)}"
    )


def test_a_run_of_identical_pods_is_placed_as_kube_scheduler_places_it(
    kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    assert kopf_scheduler.placements == kube_scheduler.placements, show(kube_scheduler, kopf_scheduler)
    # two by two, best preferred first: the rescored node keeps each next pod while it has room; the
    # second of the pair goes where the first one's order put it (y-5), not where a fresh scoring would
    # (x-4: tests/unit/scheduling/test_opportunistic_batching.py, the gate off)
    batched = {name: kube_scheduler.placements[name] for name in RUN + PAIR}
    assert batched == {
        "run-0": "n-0", "run-1": "n-0", "run-2": "n-1", "run-3": "n-1", "run-4": "n-2", "run-5": "n-2",
        "pair-0": "c-3", "pair-1": "y-5",
    }, show(kube_scheduler, kopf_scheduler)  # fmt: skip


def test_the_batch_metrics_are_kube_schedulers(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    assert kopf_scheduler.metrics == kube_scheduler.metrics, show(kube_scheduler, kopf_scheduler)
    # run-1 to run-4 and pair-1 on hints; run-0, run-5 (the memory used up) and pair-0 without; run-5 had
    # one feasible node, nothing to remember; run-1 and run-3 rescored the node before them (with room)
    assert kube_scheduler.metrics[PROFILE] == {
        "scheduler_batch_attempts_total{result=hint_used}": 5.0,
        "scheduler_batch_attempts_total{result=no_hint}": 3.0,
        "scheduler_batch_cache_flushed_total{reason=empty_list}": 1.0,
        "scheduler_batch_rescore_attempts_total{}": 2.0,
    }, show(kube_scheduler, kopf_scheduler)


def test_the_default_plugins_batch_no_pod(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    """PodTopologySpread's System defaulting signs no pod: two feasible nodes each time, nothing kept."""
    assert kopf_scheduler.metrics[PLAIN] == kube_scheduler.metrics[PLAIN], show(
        kube_scheduler, kopf_scheduler
    )
    assert kube_scheduler.metrics[PLAIN] == {
        "scheduler_batch_attempts_total{result=no_hint}": 2.0,
        "scheduler_batch_cache_flushed_total{reason=pod_not_batchable}": 2.0,
    }, show(kube_scheduler, kopf_scheduler)
