"""DeviceTaintRules through the scheduler: a rule's taint keeps a claim from the devices it selects, and
its change is, as upstream's ResourceSlice tracker sends it, a ResourceSlice update that moves the pods
DynamicResources rejected out of the unschedulable pool; a change that taints no device moves none."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.objects import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import make_node, make_pod

DRIVER = "gpu.example.com"


def _rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": "broken", "value": "yes", "effect": effect}},
    }


def _scheduler() -> tuple[Scheduler, FakeAPI]:
    client = FakeAPI()
    scheduler = Scheduler(client, clock=VirtualClock())
    scheduler.set_profile(ProfileSpec(scheduler_name="default-scheduler"))
    scheduler.add_node(make_node().name("n1").obj())
    scheduler.update_object(
        DEVICE_CLASSES,
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}},
    )
    scheduler.update_object(
        RESOURCE_SLICES,
        {
            "metadata": {"name": "n1-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        },
    )
    scheduler.update_object(
        RESOURCE_CLAIMS,
        {
            "metadata": {"name": "c", "namespace": "default", "uid": "claim-c", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        },
    )
    return scheduler, client


async def _rejected_pod(scheduler: Scheduler, client: FakeAPI) -> str:
    pod = make_pod().name("p").obj()
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    scheduler.add_pod(pod)
    while (qp := scheduler.queue.pop_nowait()) is not None:
        scheduler.schedule_one(qp)
    (_, _, message), *_ = client.failures
    assert message.startswith("0/1 nodes are available: 1 cannot allocate all claims.")
    uid = str(pod["metadata"]["uid"])
    assert scheduler.queue.location(uid) == "unschedulable"
    return uid


async def test_a_rule_tainting_the_only_device_rejects_and_its_deletion_requeues() -> None:
    scheduler, client = _scheduler()
    scheduler.update_object(DEVICE_TAINT_RULES, _rule("gpu-0-broken", device="gpu-0"))
    uid = await _rejected_pod(scheduler, client)
    scheduler.update_object(DEVICE_TAINT_RULES, _rule("gpu-0-broken", device="gpu-0"))  # the same effect
    assert scheduler.queue.location(uid) == "unschedulable"
    scheduler.update_object(DEVICE_TAINT_RULES, _rule("elsewhere", driver="other.example.com"))
    assert scheduler.queue.location(uid) == "unschedulable"
    scheduler.delete_object(DEVICE_TAINT_RULES, "", "gpu-0-broken")
    assert scheduler.queue.location(uid) in ("active", "backoff")


async def test_a_rule_whose_effect_turns_to_none_requeues() -> None:
    scheduler, client = _scheduler()
    scheduler.update_object(DEVICE_TAINT_RULES, _rule("pool-broken", pool="n1"))
    uid = await _rejected_pod(scheduler, client)
    scheduler.update_object(DEVICE_TAINT_RULES, _rule("pool-broken", effect="None", pool="n1"))
    assert scheduler.queue.location(uid) in ("active", "backoff")
