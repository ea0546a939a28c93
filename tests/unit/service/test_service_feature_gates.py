"""The operator says once, as it starts, which Kubernetes version's feature gates are in force and why
(``service/feature_gates.py``), before any profile is built: from the API server's ``/version`` unless
``--emulated-version`` names one, in which case ``/version`` is not asked."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_api import FakeAPI, json_answer

from kopf_scheduler.framework.objects import DEVICE_TAINT_RULES
from kopf_scheduler.k8s import KubeClient
from kopf_scheduler.service.config import ServiceConfig
from kopf_scheduler.service.service import SchedulerService
from kopf_scheduler.service.supervision import Supervisor

_LINE = "feature gates of Kubernetes"


async def _start(
    caplog: pytest.LogCaptureFixture, **settings: Any
) -> tuple[SchedulerService, FakeAPI, list[str]]:
    api = FakeAPI()
    api.script(
        "GET", "/version", json_answer({"major": "1", "minor": "36", "gitVersion": "v1.36.3"}), times=None
    )
    service = SchedulerService(
        ServiceConfig(leader_elect=False, **settings),
        client=KubeClient(api),  # type: ignore[arg-type]
        supervisor=Supervisor(),
    )
    with caplog.at_level(logging.INFO, "kopf_scheduler"):
        await service.start()
        await service.stop()
    return service, api, [r.getMessage() for r in caplog.records if r.getMessage().startswith(_LINE)]


async def test_the_start_says_which_versions_gates_are_in_force(caplog: pytest.LogCaptureFixture) -> None:
    service, api, lines = await _start(caplog)
    assert lines == ["feature gates of Kubernetes 1.36 in force (the API server is v1.36.3)"]
    assert [r.path for r in api.requests].count("/version") == 1
    assert service.scheduler.feature_gates.version == (1, 36)
    assert service.supervisor.healthy


async def test_an_emulated_version_is_taken_without_asking_the_api_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, api, lines = await _start(
        caplog, emulated_version="kube=1.35", feature_gates="SchedulerAsyncAPICalls=false"
    )
    assert lines == [
        "feature gates of Kubernetes 1.35 in force (--emulated-version), with --feature-gates "
        "SchedulerAsyncAPICalls=false"
    ]
    assert "/version" not in [r.path for r in api.requests]
    assert service.scheduler.feature_gates.version == (1, 35)


async def test_a_refused_gate_stops_the_start_with_its_line(caplog: pytest.LogCaptureFixture) -> None:
    service, _, lines = await _start(
        caplog, emulated_version="1.37", feature_gates="NodeDeclaredFeatures=false"
    )
    assert lines == []
    assert service.supervisor.failure == (
        "--feature-gates: cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"
    )
    assert not service.synced.is_set()


@pytest.mark.parametrize(
    ("settings", "watched"),
    [
        pytest.param({"emulated_version": "1.37"}, True, id="1.37-on-by-default"),
        pytest.param({"emulated_version": "1.36"}, False, id="1.36-off-by-default"),
        pytest.param(
            {"emulated_version": "1.37", "feature_gates": "DRADeviceTaintRules=false"}, False, id="turned-off"
        ),
    ],
)
async def test_device_taint_rules_are_listed_and_watched_only_with_their_gate(
    caplog: pytest.LogCaptureFixture, settings: dict[str, str], watched: bool
) -> None:
    """kube-scheduler starts the DeviceTaintRule informer only with DRADeviceTaintRules on; so the start
    lists them only then, the intake process is told to leave their channel out otherwise, and an event of
    theirs (the one-process handlers watch every kind) is ignored."""
    service, api, _ = await _start(caplog, **settings)
    path = "/apis/resource.k8s.io/v1/devicetaintrules"
    assert (path in [r.path for r in api.requests]) is watched
    assert (DEVICE_TAINT_RULES in service.scheduler.objects.kinds) is watched
    rule = {
        "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"pool": "p"}, "taint": {"key": "k", "effect": "NoSchedule"}},
    }
    service.object_event(DEVICE_TAINT_RULES, "ADDED", rule)
    assert len(service.scheduler.objects.store(DEVICE_TAINT_RULES)) == int(watched)
