"""DynamicResources without claim allocation: what it does for pods without claims (as upstream), and a
clear rejection for pods with claims."""

from __future__ import annotations

import pytest

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.dynamic_resources import CLAIMS_NOT_SUPPORTED, DynamicResources
from kopf_scheduler.testing import make_pod


def _pod(claims: list[str]) -> PodInfo:
    builder = make_pod().name("p")
    if claims:
        builder.set("spec.resourceClaims", [{"name": c, "resourceClaimName": c} for c in claims])
    return PodInfo(builder.obj())


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param([], SKIP, id="no-claims-skips"),
        pytest.param(["gpu"], unresolvable(f"{CLAIMS_NOT_SUPPORTED}: [gpu]"), id="claims-rejected"),
        pytest.param(["a", "b"], unresolvable(f"{CLAIMS_NOT_SUPPORTED}: [a b]"), id="names-listed"),
    ],
)
def test_pre_filter(claims: list[str], expected: Status) -> None:
    assert DynamicResources().pre_filter(CycleState(), _pod(claims), []) == (None, expected)


@pytest.mark.parametrize(
    ("ran_pre_filter", "expected"),
    [
        pytest.param(True, unschedulable("no new claims to deallocate"), id="after-pre-filter"),
        pytest.param(False, error("not found"), id="pre-filter-never-ran"),
    ],
)
def test_post_filter(ran_pre_filter: bool, expected: Status) -> None:
    plugin, state, pod = DynamicResources(), CycleState(), _pod([])
    if ran_pre_filter:
        plugin.pre_filter(state, pod, [])
    assert plugin.post_filter(state, pod, {}) == (None, expected)  # type: ignore[arg-type]
