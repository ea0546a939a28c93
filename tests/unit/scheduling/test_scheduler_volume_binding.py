"""VolumeBinding wired into the scheduler: the binding cycle writes the chosen volume's claimRef through
the client, waits on the scheduler's clock until the claim is bound (as the store sees it), then binds the
pod; a pod deleted while it waits stops the wait, is not bound, and leaves nothing assumed."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

from fake_api import FakeAPI, Request

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from kopf_scheduler.k8s.rest import Response
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import make_node, make_pod

HOSTNAME = "kubernetes.io/hostname"


def _stored_as_a_watch_echoes(scheduler: Scheduler) -> Callable[[Request], Response]:
    """The API server's side of a PUT: a stale resourceVersion gets 409; otherwise the object is stored
    with a new resourceVersion and lands in the scheduler's stores, as its watch would bring it."""
    versions = iter(range(101, 1_000_000))

    def put(request: Request) -> Response:
        obj = request.body
        kind = PERSISTENT_VOLUMES if "/persistentvolumes/" in request.path else PERSISTENT_VOLUME_CLAIMS
        current = scheduler.objects.store(kind).get(
            obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        )
        if current is None or current.resource_version != obj["metadata"]["resourceVersion"]:
            return Response(409, json.dumps({"kind": "Status", "message": "conflict"}).encode())
        stored = copy.deepcopy(dict(obj))
        stored["metadata"]["resourceVersion"] = str(next(versions))
        scheduler.update_object(kind, stored)
        return Response(200, json.dumps(stored).encode())

    return put


def _setup() -> tuple[Scheduler, FakeAPI, VirtualClock, dict[str, Any]]:
    client, clock = FakeAPI(), VirtualClock()
    scheduler = Scheduler(client, clock=clock)
    client.script("PUT", None, _stored_as_a_watch_echoes(scheduler), times=None)
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    scheduler.update_object(
        STORAGE_CLASSES,
        {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer"},
    )  # fmt: skip
    scheduler.update_object(
        PERSISTENT_VOLUMES,
        {
            "metadata": {"name": "pv-n2", "resourceVersion": "1"},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "storageClassName": "local",
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["n2"]}]}
                ]}},
            },
            "status": {"phase": "Available"},
        },
    )  # fmt: skip
    scheduler.update_object(
        PERSISTENT_VOLUME_CLAIMS,
        {"metadata": {"name": "data", "namespace": "default", "uid": "claim-uid", "resourceVersion": "1"},
         "spec": {"storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}},
    )  # fmt: skip
    for name in ("n1", "n2"):
        scheduler.add_node(make_node().name(name).obj())
    pod = (
        make_pod()
        .name("app")
        .scheduler_name("kopf-scheduler")
        .set("spec.volumes", [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
        .obj()
    )
    scheduler.add_pod(pod)
    return scheduler, client, clock, pod


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _volume_binding(scheduler: Scheduler) -> Any:
    return scheduler.profiles["kopf-scheduler"].plugins["VolumeBinding"]


async def test_the_pod_is_bound_once_the_pv_controller_binds_its_claim() -> None:
    scheduler, client, clock, _ = _setup()
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    await _settle()
    volume = scheduler.objects.of(PERSISTENT_VOLUMES).get("", "pv-n2")
    assert volume is not None and volume.claim_ref is not None and volume.claim_ref.uid == "claim-uid"
    assert client.bound == []
    claim = scheduler.objects.of(PERSISTENT_VOLUME_CLAIMS).get("default", "data")
    assert claim is not None
    raw = copy.deepcopy(dict(claim.raw))
    raw["spec"]["volumeName"] = "pv-n2"
    raw["metadata"].update(resourceVersion="200", annotations={"pv.kubernetes.io/bind-completed": "yes"})
    scheduler.update_object(PERSISTENT_VOLUME_CLAIMS, raw)  # the PV controller's doing
    clock.advance(1)
    await scheduler.wait_for_bindings()
    assert client.bound == [("default/app", "n2")]
    assert _volume_binding(scheduler).binder.volumes.assumed() == ()


async def test_a_pod_deleted_while_its_volumes_are_bound_is_not_bound() -> None:
    scheduler, client, clock, pod = _setup()
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    await _settle()
    assert scheduler.in_flight_bindings() == 1
    scheduler.delete_pod(pod)
    clock.advance(1)
    await scheduler.wait_for_bindings()
    assert client.bound == []
    # reported as kube-scheduler reports it, though the pod is gone (handleSchedulingFailure)
    assert client.failures == [
        (
            "default/app",
            "SchedulerError",
            'running PreBind plugin "VolumeBinding": binding volumes: pod does not exist any more: '
            'pod "app" not found',
        )
    ]
    assert _volume_binding(scheduler).binder.volumes.assumed() == ()
    assert scheduler.cache.get_pod(pod["metadata"]["uid"]) is None
    assert "app" not in str(scheduler.queue.pending())  # not requeued
    # the claimRef written stays, as kube-scheduler leaves it: the PV controller binds it to the claim
    volume = scheduler.objects.of(PERSISTENT_VOLUMES).get("", "pv-n2")
    assert volume is not None and volume.claim_ref is not None
