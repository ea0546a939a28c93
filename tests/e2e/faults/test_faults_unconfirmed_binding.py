"""Fault tier: a binder that answers "done" without binding (a scheduler extender's bind verb that lies
once). Upstream keeps such a pod assumed for ever, its room held and the pod never tried again; here,
after ``KOPF_SCHEDULER_CONFIRM_TIMEOUT`` the pod is read, found unbound, reported and scheduled again,
and the second (honest) bind lands. Checked from the API server's record: the pod bound by exactly one
successful binding request, a FailedScheduling event saying what happened, the bind verb asked twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from operator_harness import Operators, Scope, bind_as_extender, settled_audit, wait_profile

from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.testing.extender_server import Answer, FakeExtender

pytestmark = pytest.mark.e2e

CONFIRM_TIMEOUT = 2


def test_a_binding_answered_but_never_stored_is_scheduled_again(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    [node] = scope.nodes(1)
    asked: list[dict[str, Any]] = []

    def bind(args: dict[str, Any]) -> Answer:
        asked.append(args)
        if len(asked) > 1:  # honest from the second call on: bind as the extender would
            bind_as_extender(control_plane, args)
        return Answer({"Error": ""})

    with FakeExtender({"bind": bind}) as extender:
        scheduler_name = scope.name("lying-binder")
        scope.create_profile(
            scheduler_name,
            {
                "schedulerName": scheduler_name,
                "extenders": [{"urlPrefix": extender.url, "bindVerb": "bind", "httpTimeout": "5s"}],
            },
        )
        operator = operators.start(
            "op-lying-binder",
            lease_namespace=scope.namespace,
            env={"KOPF_SCHEDULER_CONFIRM_TIMEOUT": str(CONFIRM_TIMEOUT)},
        )
        operator.wait_leading()
        wait_profile(control_plane, scheduler_name, "True")
        scope.create_pod("p", scheduler_name=scheduler_name)
        bound = scope.wait_bound("p", timeout=60)
        assert bound["spec"]["nodeName"] == node
        assert len(asked) == 2, asked

    bindings = Counter(
        r.name
        for r in settled_audit(control_plane, scope.namespace)
        if r.is_binding and r.namespace == scope.namespace
    )
    assert bindings == Counter({"p": 1})
    event = scope.wait_event("FailedScheduling", "p")
    assert event["message"] == (
        f"binding to {node} was answered as done, but the pod is still unbound {CONFIRM_TIMEOUT}s later; "
        "scheduling it again"
    )
    assert operator.alive, operator.tail()
