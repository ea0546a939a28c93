"""``simulate`` reads both PodGroup kinds, told apart by apiVersion: scheduler-plugins'
(``scheduling.x-k8s.io/v1alpha1``, also a document without apiVersion) and the Workload API's
(``scheduling.k8s.io/v1beta1``); the same name may be used by one of each."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.framework.objects import POD_GROUPS, WORKLOAD_POD_GROUPS
from kopf_scheduler.simulate.loader import load_objects


def group(api_version: str | None, name: str = "train") -> dict[str, Any]:
    spec = (
        {"minMember": 2}
        if api_version != "scheduling.k8s.io/v1beta1"
        else {"schedulingPolicy": {"basic": {}}}
    )
    body: dict[str, Any] = {"kind": "PodGroup", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}
    if api_version is not None:
        body["apiVersion"] = api_version
    return body


def kinds(*bodies: dict[str, Any]) -> list[tuple[str, str]]:
    cluster = load_objects((f"doc-{i}", body) for i, body in enumerate(bodies))
    return [
        (kind.api_version, obj["metadata"]["name"])
        for kind, obj in cluster.objects
        if kind in (POD_GROUPS, WORKLOAD_POD_GROUPS)
    ]


def test_both_kinds_are_read_and_told_apart() -> None:
    assert kinds(group("scheduling.x-k8s.io/v1alpha1"), group("scheduling.k8s.io/v1beta1")) == [
        ("scheduling.x-k8s.io/v1alpha1", "train"),
        ("scheduling.k8s.io/v1beta1", "train"),
    ]


def test_a_pod_group_without_api_version_is_scheduler_plugins() -> None:
    assert kinds(group(None)) == [("scheduling.x-k8s.io/v1alpha1", "train")]


def test_an_api_version_serving_neither_is_refused_naming_both() -> None:
    with pytest.raises(UsageError) as raised:
        kinds(group("scheduling.k8s.io/v1"))
    assert str(raised.value) == (
        "doc-0: PodGroup: apiVersion: 'scheduling.k8s.io/v1' is not served for PodGroup "
        "(expected 'scheduling.x-k8s.io/v1alpha1' or 'scheduling.k8s.io/v1beta1')"
    )
