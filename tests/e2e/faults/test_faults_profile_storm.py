"""Fault tier: one SchedulingProfile rewritten as fast as a client can (a GitOps loop gone wrong) while
another profile's pods arrive in a burst. The operator does not crash, every pod of the other profile is
bound, and the stormed profile ends accepted at its last generation (no update lost, none stuck)."""

from __future__ import annotations

import threading

import pytest
from operator_harness import PROFILES, Operators, Scope, wait_profile

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

UPDATES = 400


def test_a_profile_storm_does_not_hold_up_another_profile(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(4)
    stormed, steady = scope.name("stormed"), scope.name("steady")
    scope.create_profile(stormed, {"schedulerName": stormed, "percentageOfNodesToScore": 10})
    scope.create_profile(steady, {"schedulerName": steady})
    operator = operators.start("op-storm", lease_namespace=scope.namespace)
    operator.wait_leading()
    wait_profile(control_plane, steady, "True")

    def storm() -> None:
        for i in range(UPDATES):
            patch = {"spec": {"percentageOfNodesToScore": 10 + i % 80}}
            response = control_plane.api.request(
                "PATCH", f"{PROFILES}/{stormed}", patch, content_type="application/merge-patch+json"
            )
            assert response.status == 200, response.text()

    storming = threading.Thread(target=storm)
    storming.start()
    try:
        scope.create_pods([scope.pod(f"s{i:03d}", scheduler_name=steady) for i in range(100)], concurrency=4)
        scope.wait_all_bound(timeout=120)
    finally:
        storming.join()
    profile = wait_profile(control_plane, stormed, "True", timeout=60)
    assert profile["spec"]["percentageOfNodesToScore"] == 10 + (UPDATES - 1) % 80
    assert operator.alive and not operator.problems(), operator.problems()
