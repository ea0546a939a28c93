"""Supervision, readiness and fencing of the operator service (``service``, ``supervision``, ``k8s.fence``),
against a fake API server: a background task that dies ends the service with a failure (the runner's exit
code 1); a graceful stop lets the bindings in flight finish before the Lease is released; losing the Lease
cancels the bindings in flight, forgets their pods and fails the service; no write is sent without the
Lease; /readyz says ready when synced and leading or standing by; what the service keeps about a pod goes
when the pod is deleted."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
from dataclasses import dataclass
from typing import Any

import pytest
from fake_api import FakeAPI, json_answer
from lease_server import LeaseServer
from waiting import until

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient
from kopf_scheduler.k8s.fence import FencedRest, FencedWrite
from kopf_scheduler.service.config import ServiceConfig, ServingConfig
from kopf_scheduler.service.service import SchedulerService
from kopf_scheduler.service.supervision import Supervisor, port_taken
from kopf_scheduler.testing.builders import make_node, make_pod

LEASE = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kopf-scheduler"


@dataclass
class Cluster:
    """The fake API server of these tests: lists from ``objects``, one Lease (``lease``) with optimistic
    concurrency, bindings held until ``bind_gate`` is set."""

    api: FakeAPI
    lease: LeaseServer
    objects: dict[str, list[dict[str, Any]]]
    bind_gate: asyncio.Event

    def story(self) -> list[str]:
        """What happened, in order: each binding sent and answered, the Lease released."""
        out = []
        for what, request in self.api.log:
            if request.path.endswith("/binding"):  # the binder sends its body as bytes
                name = json.loads(request.body)["metadata"]["name"]
                out.append(f"bind {'sent' if what == 'sent' else 'done'} {name}")
            elif (
                what == "answered"
                and (request.method, request.path) == ("PUT", LEASE)
                and not request.body["spec"]["holderIdentity"]
                and request.response is not None
                and request.response.ok
            ):
                out.append("lease released")
        return out


def cluster(objects: dict[str, list[dict[str, Any]]] | None = None) -> Cluster:
    objects = objects or {}
    api, lease = FakeAPI(), LeaseServer()
    api.script(None, LEASE.rsplit("/", 1)[0] + "*", lease.answer, times=None)
    for path, items in objects.items():
        page = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
        api.script("GET", path, json_answer(page), times=None)
    return Cluster(api, lease, objects, api.hold("POST", "*/binding"))


def service_for(c: Cluster, *, leader_elect: bool = True, **settings: Any) -> SchedulerService:
    config = ServiceConfig(
        leader_elect=leader_elect,
        lease_namespace="ns",
        identity="me",
        lease_duration=2.0,
        renew_deadline=1.0,
        retry_period=0.2,
        **settings,
    )
    fatal: list[str] = []
    supervisor = Supervisor(on_fatal=lambda: fatal.append(supervisor.failure))
    api = c.api
    return SchedulerService(
        config,
        client=KubeClient(api),  # type: ignore[arg-type]
        supervisor=supervisor,
        lease_rest=lambda: api,  # type: ignore[arg-type,return-value]
    )


def cluster_with_pending_pod() -> dict[str, list[dict[str, Any]]]:
    node = make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()
    pod = make_pod().name("p").namespace("default").scheduler_name("kopf-scheduler").obj()
    return {"/api/v1/nodes": [node], "/api/v1/pods": [pod]}


# -- the supervisor --------------------------------------------------------------------------------------


async def test_a_watched_task_that_dies_is_a_failure_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    stopped: list[bool] = []
    supervisor = Supervisor(on_fatal=lambda: stopped.append(True))

    async def dies() -> None:
        raise RuntimeError("boom")

    task = supervisor.watch(asyncio.create_task(dies(), name="queue-flush"))
    with caplog.at_level(logging.ERROR, "kopf_scheduler"):
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)

    assert supervisor.failure == "background task 'queue-flush' died: RuntimeError: boom"
    assert stopped == [True]
    [record] = caplog.records
    assert (
        record.getMessage() == "background task 'queue-flush' died: RuntimeError: boom: the scheduler stops"
    )
    assert record.exc_info is not None  # the traceback comes with it


@pytest.mark.parametrize(
    ("ending", "forever", "failure"),
    [
        pytest.param("return", True, "background task 't' ended", id="a-forever-task-returns"),
        pytest.param("return", False, "", id="a-one-job-task-returns"),
        pytest.param("cancel", False, "background task 't' was cancelled", id="cancelled-unreleased"),
        pytest.param("release", True, "", id="released-then-cancelled"),
        pytest.param("stopping", True, "", id="cancelled-while-stopping"),
    ],
)
async def test_how_a_task_ends_decides_a_failure(ending: str, forever: bool, failure: str) -> None:
    supervisor = Supervisor()
    task = supervisor.watch(
        asyncio.create_task(asyncio.sleep(0 if ending == "return" else 10), name="t"), forever=forever
    )
    if ending == "release":
        supervisor.release(task)
    if ending == "stopping":
        supervisor.stopping = True
    if ending != "return":
        task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert supervisor.failure == failure


def test_a_port_in_use_is_found() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        error = port_taken(port)
        assert error is not None and "[Errno 98]" in str(error)
    assert port_taken(port) is None
    assert port_taken(0) is None


# -- the service: a dying task ends it -------------------------------------------------------------------


async def test_a_dying_scheduling_loop_ends_the_service_with_a_failure() -> None:
    service = service_for(cluster(), leader_elect=False)

    async def broken_loop() -> None:
        raise RuntimeError("loop bug")

    service.scheduler.run = broken_loop  # type: ignore[method-assign]
    await service.start()
    await until(lambda: not service.supervisor.healthy)
    await service.stop()

    assert service.supervisor.failure == "background task 'scheduling-loop' died: RuntimeError: loop bug"
    assert service.readiness() == (False, service.supervisor.failure)
    assert service.health()["healthy"] is False


async def test_a_dying_queue_flush_ends_the_service_with_a_failure() -> None:
    service = service_for(cluster(), leader_elect=False)

    async def broken_flush() -> None:
        raise RuntimeError("flush bug")

    service.scheduler.queue.run = broken_flush  # type: ignore[method-assign]
    await service.start()
    await until(lambda: not service.supervisor.healthy)
    await service.stop()
    assert "'queue-flush' died: RuntimeError: flush bug" in service.supervisor.failure


async def test_a_metrics_port_in_use_fails_the_start_naming_the_port() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        service = service_for(cluster(), leader_elect=False, metrics=ServingConfig(port, insecure=True))
        await service.start()
        await service.stop()
    assert service.supervisor.failure.startswith(f"metrics port {port} is in use ([Errno 98]")
    assert not service.synced.is_set()


async def test_a_graceful_stop_is_no_failure() -> None:
    service = service_for(cluster())
    await service.start()
    await until(service.leading.is_set)
    await service.stop()
    assert service.supervisor.healthy


# -- fencing ---------------------------------------------------------------------------------------------


async def test_graceful_stop_releases_the_lease_only_after_the_bindings_finished() -> None:
    c = cluster(cluster_with_pending_pod())
    service = service_for(c)
    await service.start()
    await until(lambda: "bind sent p" in c.story())

    stopping = asyncio.create_task(service.stop())
    await until(lambda: service._loop_task is None)  # the loop has stopped; the binding is in flight
    for _ in range(50):  # every task that could release the lease has had its turn
        await asyncio.sleep(0)
    assert c.story() == ["bind sent p"] and not stopping.done()
    c.bind_gate.set()
    await stopping

    assert c.story() == ["bind sent p", "bind done p", "lease released"]
    assert service.supervisor.healthy


async def test_graceful_stop_cancels_bindings_past_the_timeout_then_releases() -> None:
    c = cluster(cluster_with_pending_pod())
    service = service_for(c, stop_timeout=0.2)
    await service.start()
    await until(lambda: "bind sent p" in c.story())

    await service.stop()

    assert c.story() == ["bind sent p", "lease released"]
    assert service.scheduler.cache.assumed_count() == 0


async def test_losing_the_lease_cancels_bindings_forgets_their_pods_and_fails() -> None:
    c = cluster(cluster_with_pending_pod())
    service = service_for(c)
    await service.start()
    await until(lambda: "bind sent p" in c.story())
    assert service.scheduler.cache.assumed_count() == 1

    c.lease.failing = 500  # renewals fail: the renew deadline (1 s) passes
    await until(lambda: not service.supervisor.healthy)

    assert service.supervisor.failure.startswith("leader election: lost the lease as me")
    assert service.scheduler.in_flight_bindings() == 0
    assert service.scheduler.cache.assumed_count() == 0
    assert not service.leading.is_set()
    assert service.client.fence is not None and not service.client.fence()
    c.bind_gate.set()
    await service.stop()
    assert "bind done p" not in c.story()
    assert "lease released" not in c.story()  # a lost lease is not the leader's to release


async def test_no_write_is_sent_without_the_lease() -> None:
    c = cluster()
    inner = c.api
    leading = [False]
    fenced = FencedRest(lambda: inner, lambda: leading[0])  # type: ignore[arg-type,return-value]
    pod = PodInfo(make_pod().name("p").namespace("default").obj())
    path = "/api/v1/namespaces/default/pods/p/binding"

    with pytest.raises(FencedWrite, match="does not hold the leader Lease"):
        await fenced.request("POST", path, b'{"metadata": {"name": "p"}}')
    with pytest.raises(FencedWrite):
        await fenced.request("DELETE", "/api/v1/namespaces/default/pods/victim")
    assert (await fenced.request("GET", "/api/v1/namespaces/default/pods/p")).status == 200
    assert c.story() == [] and fenced.refused == 2

    client = KubeClient(inner)  # type: ignore[arg-type]
    client.fence = lambda: leading[0]
    with pytest.raises(FencedWrite):
        await client.bind(pod, "n1")
    leading[0] = True
    c.bind_gate.set()
    await client.bind(pod, "n1")
    assert c.story() == ["bind sent p", "bind done p"]


# -- readiness -------------------------------------------------------------------------------------------


async def test_ready_when_synced_and_leading_or_standing_by() -> None:
    c = cluster()
    c.lease.lease = {  # another instance holds the lease: this one stands by
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kopf-scheduler", "namespace": "ns", "resourceVersion": "0"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 60},
    }
    service = service_for(c)
    assert service.readiness() == (False, "initial lists not loaded yet")
    await service.start()
    await until(lambda: service.readiness() == (True, "standing by"))
    c.lease.lease = None  # released: this one takes it
    await until(service.leading.is_set)
    assert service.readiness() == (True, "leading")
    await service.stop()


async def test_a_cycle_that_holds_the_event_loop_past_the_renew_deadline_keeps_the_lease() -> None:
    """Leader election renews on its own thread: a synchronous scheduling cycle that holds the event loop
    past the renew deadline neither delays the renewals nor ends leading."""
    c = cluster()
    service = service_for(c)
    await service.start()
    await until(service.leading.is_set)
    version = c.lease.version
    # the cycle: holds the loop (this thread blocks) until leader election has renewed 8 times, which the
    # Lease server's writes signal; with a retry period of 0.2 s between renewals that is 1.4 s at least,
    # past the renew deadline of 1 s. Renewals that needed the loop would never come (30 s: a failure).
    renewed = c.lease.wait_for_version(version + 8, timeout=30)
    after_block = c.lease.version
    assert renewed, f"{after_block - version} renewals while the loop was held"
    # a renewal after the block: leader election has looked at the Lease since (a lost one would show)
    await until(lambda: c.lease.version > after_block)
    assert service.supervisor.healthy, service.supervisor.failure
    assert service.leading.is_set() and service.client.fence is not None and service.client.fence()
    await service.stop()
    assert c.story() == ["lease released"]


# -- a deleted pod ---------------------------------------------------------------------------------------


async def test_a_deleted_pods_event_entries_go_with_it() -> None:
    """The Scheduled event of a bound pod is kept to aggregate repeats; once the pod's DELETED event
    arrives nothing can repeat it, and the service keeps nothing about the pod."""
    c = cluster(cluster_with_pending_pod())
    c.bind_gate.set()
    service = service_for(c, leader_elect=False)
    await service.start()
    aggregator = service.client.events.aggregator
    await until(lambda: any(e.created for e in aggregator.entries.values()))
    [entry] = aggregator.entries.values()
    assert entry.key.reason == "Scheduled"
    pod = c.objects["/api/v1/pods"][0]

    service.pod_event("DELETED", {**pod, "spec": {**pod["spec"], "nodeName": "n1"}})
    await service.stop()

    assert not aggregator.entries and not aggregator.by_uid
    assert service.scheduler.known_pods() == []


async def test_the_initial_lists_are_taken_in_with_the_collector_off_and_frozen_after() -> None:
    """The lists live on: the collector's passes over them while they load would free nothing. It is off
    while nodes and pods are listed, on again once they are in (as the process had it), and what was
    loaded is frozen, out of its later passes."""
    objects = cluster_with_pending_pod()
    c = cluster({"/api/v1/nodes": objects["/api/v1/nodes"]})
    collector_on_while_listing: list[bool] = []

    def pods(request: Any) -> Any:
        collector_on_while_listing.append(gc.isenabled())
        page = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": objects["/api/v1/pods"]}
        return json_answer(page)

    c.api.script("GET", "/api/v1/pods", pods, times=None)
    service = service_for(c, leader_elect=False)
    gc.enable()
    gc.unfreeze()
    try:
        await service.start()
        assert service.synced.is_set()
        assert collector_on_while_listing == [False]
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        await service.stop()
