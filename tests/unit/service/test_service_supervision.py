"""Supervision, readiness and fencing of the operator service (``service``, ``supervision``, ``k8s.fence``),
against a fake API server: a background task that dies ends the service with a failure (the runner's exit
code 1); a graceful stop lets the bindings in flight finish before the Lease is released; losing the Lease
cancels the bindings in flight, forgets their pods and fails the service; no write is sent without the
Lease; /readyz says ready when synced and leading or standing by; what the service keeps about a pod goes
when the pod is deleted."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

import pytest
from waiting import until

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient, RestClient
from kopf_scheduler.k8s.fence import FencedRest, FencedWrite
from kopf_scheduler.k8s.rest import Response
from kopf_scheduler.k8s.stats import ClientStats
from kopf_scheduler.service.config import ServiceConfig, ServingConfig
from kopf_scheduler.service.service import SchedulerService
from kopf_scheduler.service.supervision import Supervisor, port_taken
from kopf_scheduler.testing.builders import make_node, make_pod

LEASE = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/kopf-scheduler"


class FakeAPI(RestClient):
    """Lists from ``objects``; one Lease with optimistic concurrency; bindings wait for ``bind_gate``;
    ``log`` records what happened, in order."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.stats = ClientStats()
        self.timeout = 10.0
        self.objects = objects or {}
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.lease_down = False
        self.bind_gate = asyncio.Event()
        self.log: list[str] = []

    async def get_json(self, path: str, params: Any = None, *, accept: str = "") -> Any:  # as RestClient
        return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": self.objects.get(path, [])}

    async def close(self) -> None:
        return None

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Response:
        if path.startswith(LEASE.rsplit("/", 1)[0]):
            return self._lease(method, body)
        if path.endswith("/binding"):
            self.log.append(f"bind sent {json.loads(body)['metadata']['name']}")
            await self.bind_gate.wait()
            self.log.append(f"bind done {json.loads(body)['metadata']['name']}")
            return Response(201, b"{}")
        return Response(201 if method == "POST" else 200, b"{}")

    def _lease(self, method: str, body: Any) -> Response:
        if self.lease_down:
            return Response(500, b'{"message": "etcdserver: request timed out"}')
        if method == "GET":
            return Response(404) if self.lease is None else Response(200, json.dumps(self.lease).encode())
        if method == "PUT" and body["metadata"].get("resourceVersion") != str(self.version):
            return Response(409, b'{"message": "conflict"}')
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        holder = body["spec"]["holderIdentity"]
        if method == "PUT" and not holder:
            self.log.append("lease released")
        return Response(201 if method == "POST" else 200, json.dumps(self.lease).encode())


def service_for(api: FakeAPI, *, leader_elect: bool = True, **settings: Any) -> SchedulerService:
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
    return SchedulerService(config, client=KubeClient(api), supervisor=supervisor, lease_rest=lambda: api)


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
    service = service_for(FakeAPI(), leader_elect=False)

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
    service = service_for(FakeAPI(), leader_elect=False)

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
        service = service_for(FakeAPI(), leader_elect=False, metrics=ServingConfig(port, insecure=True))
        await service.start()
        await service.stop()
    assert service.supervisor.failure.startswith(f"metrics port {port} is in use ([Errno 98]")
    assert not service.synced.is_set()


async def test_a_graceful_stop_is_no_failure() -> None:
    service = service_for(FakeAPI())
    await service.start()
    await until(service.leading.is_set)
    await service.stop()
    assert service.supervisor.healthy


# -- fencing ---------------------------------------------------------------------------------------------


async def test_graceful_stop_releases_the_lease_only_after_the_bindings_finished() -> None:
    api = FakeAPI(cluster_with_pending_pod())
    service = service_for(api)
    await service.start()
    await until(lambda: "bind sent p" in api.log)

    stopping = asyncio.create_task(service.stop())
    await until(lambda: service._loop_task is None)  # the loop has stopped; the binding is in flight
    for _ in range(50):  # every task that could release the lease has had its turn
        await asyncio.sleep(0)
    assert api.log == ["bind sent p"] and not stopping.done()
    api.bind_gate.set()
    await stopping

    assert api.log == ["bind sent p", "bind done p", "lease released"]
    assert service.supervisor.healthy


async def test_graceful_stop_cancels_bindings_past_the_timeout_then_releases() -> None:
    api = FakeAPI(cluster_with_pending_pod())
    service = service_for(api, stop_timeout=0.2)
    await service.start()
    await until(lambda: "bind sent p" in api.log)

    await service.stop()

    assert api.log == ["bind sent p", "lease released"]
    assert service.scheduler.cache.assumed_count() == 0


async def test_losing_the_lease_cancels_bindings_forgets_their_pods_and_fails() -> None:
    api = FakeAPI(cluster_with_pending_pod())
    service = service_for(api)
    await service.start()
    await until(lambda: "bind sent p" in api.log)
    assert service.scheduler.cache.assumed_count() == 1

    api.lease_down = True  # renewals fail: the renew deadline (1 s) passes
    await until(lambda: not service.supervisor.healthy)

    assert service.supervisor.failure.startswith("leader election: lost the lease as me")
    assert service.scheduler.in_flight_bindings() == 0
    assert service.scheduler.cache.assumed_count() == 0
    assert not service.leading.is_set()
    assert service.client.fence is not None and not service.client.fence()
    api.bind_gate.set()
    await service.stop()
    assert "bind done p" not in api.log
    assert "lease released" not in api.log  # a lost lease is not the leader's to release


async def test_no_write_is_sent_without_the_lease() -> None:
    inner = FakeAPI()
    leading = [False]
    fenced = FencedRest(inner, lambda: leading[0])
    pod = PodInfo(make_pod().name("p").namespace("default").obj())
    path = "/api/v1/namespaces/default/pods/p/binding"

    with pytest.raises(FencedWrite, match="does not hold the leader Lease"):
        await fenced.request("POST", path, b'{"metadata": {"name": "p"}}')
    with pytest.raises(FencedWrite):
        await fenced.request("DELETE", "/api/v1/namespaces/default/pods/victim")
    assert (await fenced.request("GET", "/api/v1/namespaces/default/pods/p")).status == 200
    assert inner.log == [] and fenced.refused == 2

    client = KubeClient(inner)
    client.fence = lambda: leading[0]
    with pytest.raises(FencedWrite):
        await client.bind(pod, "n1")
    leading[0] = True
    inner.bind_gate.set()
    await client.bind(pod, "n1")
    assert inner.log == ["bind sent p", "bind done p"]


# -- readiness -------------------------------------------------------------------------------------------


async def test_ready_when_synced_and_leading_or_standing_by() -> None:
    api = FakeAPI()
    api.lease = {  # another instance holds the lease: this one stands by
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kopf-scheduler", "namespace": "ns", "resourceVersion": "0"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 60},
    }
    service = service_for(api)
    assert service.readiness() == (False, "initial lists not loaded yet")
    await service.start()
    await until(lambda: service.readiness() == (True, "standing by"))
    api.lease = None  # released: this one takes it
    await until(service.leading.is_set)
    assert service.readiness() == (True, "leading")
    await service.stop()


async def test_a_cycle_that_holds_the_event_loop_past_the_renew_deadline_keeps_the_lease() -> None:
    """Leader election renews on its own thread: a synchronous scheduling cycle that holds the event loop
    for 2.5 renew deadlines neither delays the renewals nor ends leading."""
    api = FakeAPI()
    service = service_for(api)
    await service.start()
    await until(service.leading.is_set)
    version = api.version
    time.sleep(2.5)  # the cycle: renew deadline 1 s, retry period 0.2 s
    after_block = api.version
    renewals = after_block - version
    # a renewal after the block: leader election has looked at the Lease since (a lost one would show)
    await until(lambda: api.version > after_block)
    assert renewals >= 5, f"{renewals} renewals while the loop was held"
    assert service.supervisor.healthy, service.supervisor.failure
    assert service.leading.is_set() and service.client.fence is not None and service.client.fence()
    await service.stop()
    assert api.log == ["lease released"]


# -- a deleted pod ---------------------------------------------------------------------------------------


async def test_a_deleted_pods_event_entries_go_with_it() -> None:
    """The Scheduled event of a bound pod is kept to aggregate repeats; once the pod's DELETED event
    arrives nothing can repeat it, and the service keeps nothing about the pod."""
    api = FakeAPI(cluster_with_pending_pod())
    api.bind_gate.set()
    service = service_for(api, leader_elect=False)
    await service.start()
    aggregator = service.client.events.aggregator
    await until(lambda: any(e.created for e in aggregator.entries.values()))
    [entry] = aggregator.entries.values()
    assert entry.key.reason == "Scheduled"
    pod = api.objects["/api/v1/pods"][0]

    service.pod_event("DELETED", {**pod, "spec": {**pod["spec"], "nodeName": "n1"}})
    await service.stop()

    assert not aggregator.entries and not aggregator.by_uid
    assert service.scheduler.known_pods() == []
