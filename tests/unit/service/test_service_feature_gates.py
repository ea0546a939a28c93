"""The operator says once, as it starts, which Kubernetes version's feature gates are in force and why
(``service/feature_gates.py``), before any profile is built: from the API server's ``/version`` unless
``--emulated-version`` names one, in which case ``/version`` is not asked."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_api import FakeAPI, json_answer

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
