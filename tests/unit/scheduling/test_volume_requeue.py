"""The volume plugins' queueing hints through the scheduler: a store change of a storage kind is an
event that moves the pods it may help out of the unschedulable pool, and leaves the others there."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.objects import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import make_node, make_pod


def _scheduler(*nodes: dict[str, Any]) -> tuple[Scheduler, FakeAPI, VirtualClock]:
    client, clock = FakeAPI(), VirtualClock()
    scheduler = Scheduler(client, clock=clock)
    scheduler.set_profile(ProfileSpec(scheduler_name="default-scheduler"))
    for node in nodes or (make_node().name("n1").obj(),):
        scheduler.add_node(node)
    return scheduler, client, clock


async def _drain(scheduler: Scheduler) -> None:
    while (qp := scheduler.queue.pop_nowait()) is not None:
        scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()


def _pod(name: str, *claims: str) -> dict[str, Any]:
    raw = make_pod().name(name).obj()
    raw["spec"]["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return raw


def _claim(name: str, volume: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if volume:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"metadata": meta, "spec": {"volumeName": volume, "storageClassName": "manual"}}


def _csi_volume(name: str, claim: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "csi": {"driver": "d", "volumeHandle": name},
            "storageClassName": "manual",
            "claimRef": {"namespace": "default", "name": claim},
        },
    }


async def test_a_created_claim_requeues_only_the_pods_that_use_it() -> None:
    scheduler, client, _ = _scheduler()
    waiting, other = _pod("waiting", "data"), _pod("other", "logs")
    scheduler.add_pod(waiting)
    scheduler.add_pod(other)
    await _drain(scheduler)
    (_, _, message), *_ = client.failures
    assert message.startswith('0/1 nodes are available: persistentvolumeclaim "data" not found.')
    assert scheduler.queue.location(waiting["metadata"]["uid"]) == "unschedulable"
    scheduler.update_object(PERSISTENT_VOLUME_CLAIMS, _claim("data", "pv-data"))
    assert scheduler.queue.location(waiting["metadata"]["uid"]) in ("active", "backoff")
    assert scheduler.queue.location(other["metadata"]["uid"]) == "unschedulable"


async def test_a_volume_relabelled_into_the_nodes_zone_lets_the_pod_in() -> None:
    zone = "topology.kubernetes.io/zone"
    scheduler, client, clock = _scheduler(make_node().name("n1").label(zone, "a").obj())
    scheduler.update_object(PERSISTENT_VOLUME_CLAIMS, _claim("data", "pv-data"))
    scheduler.update_object(PERSISTENT_VOLUMES, _csi_volume("pv-data", "data", {zone: "b"}))
    pod = _pod("p", "data")
    scheduler.add_pod(pod)
    await _drain(scheduler)
    *_, (_, _, message) = client.failures
    assert message.startswith("0/1 nodes are available: 1 node(s) had no available volume zone.")
    uid = pod["metadata"]["uid"]
    scheduler.update_object(PERSISTENT_VOLUMES, {**_csi_volume("pv-data", "data", {zone: "b"}), "x": 1})
    assert scheduler.queue.location(uid) == "unschedulable"  # labels unchanged: skipped
    scheduler.update_object(PERSISTENT_VOLUMES, _csi_volume("pv-data", "data", {zone: "a"}))
    assert scheduler.queue.location(uid) in ("active", "backoff")
    clock.advance(10)
    scheduler.queue.flush_due()
    await _drain(scheduler)
    assert client.bound == [("default/p", "n1")]


async def test_a_raised_csi_limit_requeues_a_pod_that_exceeded_it() -> None:
    scheduler, client, _ = _scheduler()
    csi_node = {
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "nodeID": "n1", "allocatable": {"count": 1}}]},
    }
    scheduler.update_object(CSI_NODES, csi_node)
    for name in ("a", "b"):
        scheduler.update_object(PERSISTENT_VOLUME_CLAIMS, _claim(name, f"pv-{name}"))
        scheduler.update_object(PERSISTENT_VOLUMES, _csi_volume(f"pv-{name}", name))
    scheduler.add_pod({**_pod("first", "a"), "spec": {**_pod("first", "a")["spec"], "nodeName": "n1"}})
    pod = _pod("second", "b")
    scheduler.add_pod(pod)
    await _drain(scheduler)
    *_, (_, _, message) = client.failures
    assert message.startswith("0/1 nodes are available: 1 node(s) exceed max volume count.")
    uid = pod["metadata"]["uid"]
    lowered = {
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "nodeID": "n1", "allocatable": {"count": 0}}]},
    }
    scheduler.update_object(CSI_NODES, lowered)
    assert scheduler.queue.location(uid) == "unschedulable"
    raised = {
        "metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "d", "nodeID": "n1", "allocatable": {"count": 2}}]},
    }
    scheduler.update_object(CSI_NODES, raised)
    assert scheduler.queue.location(uid) in ("active", "backoff")
