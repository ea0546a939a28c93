"""Resync: after a watch lists again, pods and nodes deleted while nobody watched are dropped; what the
list has, or what was heard of after the list was asked for, stays."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.objects import NAMESPACES, SERVICES, WATCHED_KINDS, ObjectKind
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.resync import Resync
from kopf_scheduler.testing import make_node, make_pod


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Cluster:
    """What a LIST returns; ``during_list`` runs while the list is in flight (an event arriving then)."""

    def __init__(
        self,
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        others: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.nodes, self.pods = nodes, pods
        #: other kinds by collection path
        self.others = others or {}
        self.during_list: Any = None

    async def list_objects(self, path: str) -> list[dict[str, Any]]:
        if self.during_list is not None:
            self.during_list()
            self.during_list = None
        if path == "/api/v1/nodes":
            return self.nodes
        if path == "/api/v1/pods":
            return self.pods
        return self.others.get(path, [])


def _setup() -> tuple[Scheduler, dict[str, dict[str, Any]]]:
    scheduler = Scheduler(FakeAPI())
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    objects = {
        "n1": make_node().name("n1").obj(),
        "n2": make_node().name("n2").obj(),
        "running": make_pod().name("running").req(cpu="1").node("n1").obj(),
        "stale": make_pod().name("stale").req(cpu="1").node("n1").obj(),
        "pending": make_pod().name("pending").scheduler_name("kopf-scheduler").obj(),
        "pending-stale": make_pod().name("pending-stale").scheduler_name("kopf-scheduler").obj(),
    }
    for name in ("n1", "n2"):
        scheduler.add_node(objects[name])
    for name in ("running", "stale", "pending", "pending-stale"):
        scheduler.add_pod(objects[name])
    return scheduler, objects


def _uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


class _Deletions:
    """What the service does on a DELETED event, which the resync is given to forget what its list lacks;
    records what it was asked to forget."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.resync: Resync | None = None
        self.forgotten: list[str] = []

    def pod(self, raw: Mapping[str, Any]) -> None:
        assert self.resync is not None
        self.forgotten.append(_uid(raw))
        self.resync.pod_gone(_uid(raw))
        self.scheduler.delete_pod(raw)

    def node(self, name: str) -> None:
        assert self.resync is not None
        self.forgotten.append(name)
        self.resync.node_gone(name)
        self.scheduler.delete_node(name)

    def object(self, kind: ObjectKind[Any], key: tuple[str, str]) -> None:
        assert self.resync is not None
        self.forgotten.append(f"{kind}/{key[0]}/{key[1]}")
        self.resync.object_gone(kind, key)
        self.scheduler.delete_object(kind, *key)


def _resync(scheduler: Scheduler, list_objects: Any, **options: Any) -> tuple[Resync, _Deletions]:
    deletions = _Deletions(scheduler)
    deletions.resync = Resync(
        scheduler,
        list_objects,
        forget_pod=deletions.pod,
        forget_node=deletions.node,
        forget_object=deletions.object,
        **options,
    )
    return deletions.resync, deletions


async def test_objects_missing_from_the_list_are_dropped() -> None:
    scheduler, objects = _setup()
    cluster = _Cluster([objects["n1"]], [objects["running"], objects["pending"]])
    clock = _Clock()
    resync, deletions = _resync(scheduler, cluster.list_objects, clock=clock)
    clock.now = 200.0
    assert await resync.reconcile() == (2, 1, 0)
    # each as its DELETED event would be
    assert sorted(deletions.forgotten) == sorted(
        [_uid(objects["stale"]), _uid(objects["pending-stale"]), "n2"]
    )
    assert scheduler.cache.get_pod(_uid(objects["stale"])) is None
    assert scheduler.cache.node_info("n1") is not None and scheduler.cache.node_info("n2") is None
    assert scheduler.cache.node_info("n1").requested.get("cpu") == 1000  # the stale pod no longer counts
    assert _uid(objects["pending-stale"]) not in scheduler.queue
    assert _uid(objects["pending"]) in scheduler.queue
    assert scheduler.cache.get_pod(_uid(objects["running"])) is not None


async def test_what_is_heard_of_after_the_list_was_asked_for_stays() -> None:
    scheduler, objects = _setup()
    cluster = _Cluster([objects["n1"]], [objects["running"], objects["pending"]])
    clock = _Clock()
    resync, _ = _resync(scheduler, cluster.list_objects, clock=clock)
    created = make_pod().name("created").scheduler_name("kopf-scheduler").obj()

    def created_while_listing() -> None:  # created after the list's snapshot: the list lacks it
        clock.now += 1
        resync.pod_seen(_uid(created), listed=False)
        scheduler.add_pod(created)
        resync.node_seen("n2", listed=False)

    cluster.during_list = created_while_listing
    assert await resync.reconcile() == (2, 0, 0)
    assert _uid(created) in scheduler.queue
    assert scheduler.cache.node_info("n2") is not None


async def test_a_listing_is_followed_by_one_reconciliation_once_it_is_quiet() -> None:
    scheduler, objects = _setup()
    calls: list[str] = []
    cluster = _Cluster([objects["n1"], objects["n2"]], [objects["running"], objects["pending"]])

    async def counting(path: str) -> list[dict[str, Any]]:
        calls.append(path)
        return await cluster.list_objects(path)

    now = [0.0]  # the resync's clock: quiet periods are measured on it, not on the machine's
    resync, _ = _resync(scheduler, counting, quiet=0.05, clock=lambda: now[0])
    resync.pod_seen(_uid(objects["running"]), listed=True)
    now[0] = 0.04
    resync.pod_seen(_uid(objects["pending"]), listed=True)  # the listing goes on: quiet from here
    now[0] = 0.08
    for _ in range(3):  # the resync task wakes and finds the quiet period not over on its clock
        await asyncio.sleep(0.05)
    assert calls == []  # not quiet for 0.05 yet on its clock
    now[0] = 0.1
    one_round = ["/api/v1/nodes", "/api/v1/pods", *(kind.list_path for kind in WATCHED_KINDS)]
    async with asyncio.timeout(5):
        while len(calls) < len(one_round):
            await asyncio.sleep(0.01)
    now[0] = 1.0
    await asyncio.sleep(0.1)
    assert calls == one_round  # one round: nothing listed since, so no other
    assert scheduler.cache.get_pod(_uid(objects["stale"])) is None
    await resync.stop()


class _Warnings(logging.Handler):
    """The resync's warnings, and an event set by the first."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logged = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.logged.set()


async def test_a_failed_list_drops_nothing() -> None:
    scheduler, objects = _setup()
    calls: list[str] = []

    async def failing(path: str) -> list[dict[str, Any]]:
        calls.append(path)
        if path == "/api/v1/nodes":
            return []  # were it acted on alone, both nodes would go
        raise RuntimeError("connection refused")

    resync, deletions = _resync(scheduler, failing, quiet=0.01)
    warnings = _Warnings()
    logger = logging.getLogger("kopf_scheduler.service.resync")
    logger.addHandler(warnings)
    try:
        resync.pod_seen(_uid(objects["running"]), listed=True)
        await asyncio.wait_for(warnings.logged.wait(), 5)  # the reconciliation ran, and failed
    finally:
        logger.removeHandler(warnings)
        await resync.stop()
    assert warnings.messages == ["resync after a watch listing failed: connection refused"]
    assert calls == ["/api/v1/nodes", "/api/v1/pods"]
    assert len(scheduler.known_pods()) == 4
    assert sorted(scheduler.cache.node_names()) == ["n1", "n2"]
    assert deletions.forgotten == []


def _service(name: str, **selector: str) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector},
    }


async def test_services_and_namespaces_missing_from_the_list_are_dropped() -> None:
    scheduler, objects = _setup()
    scheduler.update_object(SERVICES, _service("kept", app="a"))
    scheduler.update_object(SERVICES, _service("stale", app="b"))
    scheduler.update_object(NAMESPACES, {"kind": "Namespace", "metadata": {"name": "gone"}})
    cluster = _Cluster(
        [objects["n1"], objects["n2"]],
        [objects[name] for name in ("running", "stale", "pending", "pending-stale")],
        {"/api/v1/services": [_service("kept", app="a")], "/api/v1/namespaces": []},
    )
    clock = _Clock()
    resync, deletions = _resync(scheduler, cluster.list_objects, clock=clock)
    # heard of after the list was asked for: a watch event racing the list keeps the object
    cluster.during_list = lambda: resync.object_seen(SERVICES, ("default", "late"), listed=False)
    scheduler.update_object(SERVICES, _service("late", app="c"))
    clock.now = 200.0
    assert await resync.reconcile() == (0, 0, 2)
    assert sorted(deletions.forgotten) == [f"{NAMESPACES}//gone", f"{SERVICES}/default/stale"]
    services = scheduler.objects.of(SERVICES)
    assert sorted(s.name for s in services.list("default")) == ["kept", "late"]
    assert scheduler.objects.of(NAMESPACES).get("", "gone") is None
