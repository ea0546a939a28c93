"""Who may preempt (``PodEligibleToPreemptOthers``): not with ``preemptionPolicy: Never``; not while a
lower-priority pod on the nominated node is terminating because the scheduler preempted it, unless that
node now fails for a reason preemption cannot fix."""

from __future__ import annotations

from typing import Any

import pytest
from _preemption_kit import Harness, node

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status, unresolvable, unschedulable
from kopf_scheduler.plugins.default_preemption import (
    MESSAGE_PREFIX,
    NOT_ELIGIBLE_POLICY_NEVER,
    NOT_ELIGIBLE_TERMINATING,
)
from kopf_scheduler.testing import make_pod

DELETED = "2026-01-01T00:00:00Z"


def condition(reason: str = "PreemptionByScheduler", status: str = "True") -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": status, "reason": reason}


def on_n1(
    name: str, priority: int, deleting: bool = False, conditions: tuple[dict[str, Any], ...] = ()
) -> Any:
    builder = make_pod().name(name).uid(name).priority(priority).req(cpu="1").node("n1")
    if deleting:
        builder = builder.set("metadata.deletionTimestamp", DELETED)
    if conditions:
        builder = builder.set("status.conditions", list(conditions))
    return builder.obj()


def incoming(policy: str | None = None, nominated: str = "") -> PodInfo:
    builder = make_pod().name("p").uid("p").priority(100).req(cpu="1")
    if policy:
        builder = builder.set("spec.preemptionPolicy", policy)
    if nominated:
        builder = builder.nominated(nominated)
    return PodInfo(builder.obj())


@pytest.mark.parametrize(
    ("pod", "others", "nominated_status", "expected"),
    [
        pytest.param(incoming(), [], None, (True, ""), id="default-policy"),
        pytest.param(incoming("PreemptLowerPriority"), [], None, (True, ""), id="preempt-lower-priority"),
        pytest.param(incoming("Never"), [], None, (False, NOT_ELIGIBLE_POLICY_NEVER), id="never"),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True, conditions=(condition(),))],
            None,
            (False, "not eligible due to a terminating pod on the nominated node."),
            id="victim-terminating-on-nominated-node",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True, conditions=(condition(),))],
            unresolvable("node(s) had untolerated taint(s)"),
            (True, ""),
            id="nominated-node-now-unresolvable",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True, conditions=(condition(),))],
            unschedulable("Insufficient cpu"),
            (False, "not eligible due to a terminating pod on the nominated node."),
            id="nominated-node-unschedulable",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True)],
            None,
            (True, ""),
            id="terminating-without-condition",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True, conditions=(condition("DeletionByTaintManager"),))],
            None,
            (True, ""),
            id="terminating-for-another-reason",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, deleting=True, conditions=(condition(status="False"),))],
            None,
            (True, ""),
            id="condition-false",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("victim", 1, conditions=(condition(),))],
            None,
            (True, ""),
            id="condition-but-not-deleting",
        ),
        pytest.param(
            incoming(nominated="n1"),
            [on_n1("peer", 100, deleting=True, conditions=(condition(),))],
            None,
            (True, ""),
            id="terminating-pod-not-lower-priority",
        ),
        pytest.param(
            incoming(nominated="gone"),
            [on_n1("victim", 1, deleting=True, conditions=(condition(),))],
            None,
            (True, ""),
            id="nominated-node-unknown",
        ),
        pytest.param(
            incoming(),
            [on_n1("victim", 1, deleting=True, conditions=(condition(),))],
            None,
            (True, ""),
            id="not-nominated",
        ),
    ],
)
def test_pod_eligible_to_preempt_others(
    pod: PodInfo, others: list[Any], nominated_status: Status | None, expected: tuple[bool, str]
) -> None:
    harness = Harness([node("n1")], others)
    verdict = harness.plugin.pod_eligible_to_preempt_others(pod, pod.nominated_node_name, nominated_status)
    assert verdict == expected


def test_never_is_reported_in_the_post_filter_message() -> None:
    harness = Harness([node("n1", cpu="1")], [on_n1("low", 0)])
    result, status = harness.post_filter(incoming("Never"))
    assert result is None
    assert status == Status(
        Code.UNSCHEDULABLE, (MESSAGE_PREFIX + NOT_ELIGIBLE_POLICY_NEVER,), "DefaultPreemption"
    )


def test_a_pending_preemption_keeps_the_nomination() -> None:
    pods = [on_n1("victim", 1, deleting=True, conditions=(condition(),))]
    harness = Harness([node("n1", cpu="1")], pods)
    result, status = harness.post_filter(incoming(nominated="n1"))
    assert result is None  # no result: the nomination stays as it is
    assert status == Status(
        Code.UNSCHEDULABLE,
        ("preemption: not eligible due to a terminating pod on the nominated node.",),
        "DefaultPreemption",
    )


def test_a_nomination_not_yet_written_back_counts() -> None:
    """Right after preempting, the scheduler holds the pod's nomination before the watch brings back its
    ``status.nominatedNodeName``: an attempt in between must not preempt a second node while the first
    node's victims terminate."""
    victim = on_n1("victim", 1, deleting=True, conditions=(condition(),))
    harness = Harness([node("n1", cpu="1"), node("n2", cpu="1")], [victim, _low_on("n2")])
    pod = incoming()  # its status says nothing yet
    harness.sched.queue.add_nominated_pod(pod, "n1")
    result, status = harness.post_filter(pod)
    assert status is not None and status.code == Code.UNSCHEDULABLE
    assert status.message() == f"{MESSAGE_PREFIX}{NOT_ELIGIBLE_TERMINATING}"
    assert result is None  # no new nomination: n2's pod is not a victim


def _low_on(node_name: str) -> Any:
    return (
        make_pod()
        .name(f"low-{node_name}")
        .uid(f"low-{node_name}")
        .priority(1)
        .req(cpu="1")
        .node(node_name)
        .obj()
    )
