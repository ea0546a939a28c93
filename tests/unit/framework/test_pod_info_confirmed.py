"""``PodInfo.confirmed``: an assumed pod takes its bound version without reading it again only when the
binding is all that changed; anything it reads from the object sends it back to a full read."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_pod


def _pending() -> dict[str, Any]:
    pod = make_pod().name("p").req(cpu="500m", memory="1Gi").label("app", "a").obj()
    pod["metadata"]["resourceVersion"] = "1"
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return pod


def _bound(pod: dict[str, Any]) -> dict[str, Any]:
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    bound["metadata"]["resourceVersion"] = "2"
    return bound


def test_the_bound_version_reads_as_a_fresh_read_of_it() -> None:
    pending = _pending()
    assumed = PodInfo(pending).bound_to("n1")
    bound = _bound(pending)
    confirmed = assumed.confirmed(bound)
    assert confirmed is not None and confirmed.raw is bound
    fresh = PodInfo(bound)
    for slot in PodInfo.__slots__:
        if slot not in ("raw", "extra"):
            assert getattr(confirmed, slot) == getattr(fresh, slot), slot


def _label(pod: dict[str, Any]) -> None:
    pod["metadata"]["labels"]["app"] = "b"


def _requests(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"


def _nomination(pod: dict[str, Any]) -> None:
    pod["status"]["nominatedNodeName"] = "n2"


def _deletion(pod: dict[str, Any]) -> None:
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"


def _unbound(pod: dict[str, Any]) -> None:
    del pod["spec"]["nodeName"]


@pytest.mark.parametrize("change", [_label, _requests, _nomination, _deletion, _unbound])
def test_any_other_change_is_left_to_a_full_read(change: Callable[[dict[str, Any]], None]) -> None:
    pending = _pending()
    bound = _bound(pending)
    change(bound)
    assert PodInfo(pending).bound_to("n1").confirmed(bound) is None
