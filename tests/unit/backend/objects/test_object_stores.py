"""Cluster-object kinds and stores: what is kept of each object, how bad objects are refused, and what
listers hand to plugins."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.objects import (
    NAMESPACES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
    WATCHED_KINDS,
    Namespace,
    ObjectParseError,
    ReplicationController,
    Service,
)
from kopf_scheduler.framework.selectors import Requirement


def _obj(kind: str, name: str, namespace: str | None = "default", **rest: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta, **rest}


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        pytest.param(
            NAMESPACES,
            {"metadata": {"name": "team-a", "labels": {"team": "a"}}},
            Namespace("team-a", {"team": "a"}),
            id="namespace-labels",
        ),
        pytest.param(
            NAMESPACES, {"metadata": {"name": "bare"}}, Namespace("bare", {}), id="namespace-no-labels"
        ),
        pytest.param(
            SERVICES,
            _obj("Service", "web", spec={"selector": {"app": "web"}}),
            Service("default", "web", {"app": "web"}),
            id="service",
        ),
        pytest.param(
            SERVICES,
            _obj("Service", "headless", spec={"selector": {}}),
            Service("default", "headless", None),
            id="service-empty-selector-selects-nothing",
        ),
        pytest.param(
            SERVICES,
            _obj("Service", "external", namespace=None, spec={"type": "ExternalName"}),
            Service("default", "external", None),
            id="service-no-selector-in-default-namespace",
        ),
        pytest.param(
            REPLICATION_CONTROLLERS,
            _obj("ReplicationController", "rc", spec={"selector": {"app": "rc"}}),
            ReplicationController("default", "rc", {"app": "rc"}),
            id="replication-controller",
        ),
    ],
)
def test_parse(kind: Any, raw: dict[str, Any], expected: Any) -> None:
    assert kind.parse(raw) == expected


def test_replica_set_keeps_its_selector_requirements() -> None:
    raw = _obj(
        "ReplicaSet",
        "web-abc",
        spec={
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}],
            }
        },
    )
    owner = REPLICA_SETS.parse(raw)
    assert owner.requirements == (
        Requirement("app", "In", frozenset({"web"})),
        Requirement("tier", "In", frozenset({"front"})),
    )


def test_an_invalid_controller_selector_is_kept_as_adding_nothing() -> None:
    raw = _obj(
        "StatefulSet", "db", spec={"selector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}}
    )
    assert STATEFUL_SETS.parse(raw).requirements == ()


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        pytest.param(NAMESPACES, {"metadata": {}}, "metadata.name: required", id="no-name"),
        pytest.param(NAMESPACES, {"metadata": "x"}, "metadata: must be an object", id="metadata-not-object"),
        pytest.param(
            NAMESPACES,
            {"metadata": {"name": "n", "labels": {"a": 1}}},
            "metadata.labels.a: must be a string, not 1",
            id="label-not-string",
        ),
        pytest.param(
            SERVICES,
            _obj("Service", "s", spec={"selector": ["app"]}),
            "spec.selector: must be a map of strings",
            id="service-selector-list",
        ),
        pytest.param(
            SERVICES, _obj("Service", "s", spec="x"), "spec: must be an object", id="spec-not-object"
        ),
    ],
)
def test_parse_errors_name_the_field(kind: Any, raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectParseError) as e:
        kind.parse(raw)
    assert str(e.value) == message


def test_store_lists_by_namespace_and_counts_generations() -> None:
    objects = ClusterObjects(WATCHED_KINDS)
    services = objects.of(SERVICES)
    assert services.list() == () and services.generation == 0
    old, new = objects.store(SERVICES).upsert(_obj("Service", "a", spec={"selector": {"x": "1"}}))
    assert old is None and new == Service("default", "a", {"x": "1"})
    objects.store(SERVICES).upsert(_obj("Service", "b", namespace="other", spec={"selector": {"x": "2"}}))
    old, new = objects.store(SERVICES).upsert(_obj("Service", "a", spec={"selector": {"x": "3"}}))
    assert old == Service("default", "a", {"x": "1"}) and new.selector == {"x": "3"}
    assert services.generation == 3
    assert [s.name for s in services.list("default")] == ["a"]
    assert sorted(s.name for s in services.list()) == ["a", "b"]
    assert services.list("nowhere") == ()
    assert services.get("other", "b") is not None and services.get("default", "b") is None
    listed = services.list()
    assert services.list() is listed  # unchanged store: the same tuple, nothing rebuilt
    assert objects.store(SERVICES).delete("other", "b") == Service("other", "b", {"x": "2"})
    assert services.list() is not listed and [s.name for s in services.list()] == ["a"]
    assert services.list("other") == ()
    assert objects.store(SERVICES).delete("other", "b") is None
    assert services.generation == 4


def test_a_refused_object_leaves_the_store_unchanged() -> None:
    objects = ClusterObjects(WATCHED_KINDS)
    store = objects.store(NAMESPACES)
    store.upsert({"metadata": {"name": "n", "labels": {"a": "1"}}})
    with pytest.raises(ObjectParseError):
        store.upsert({"metadata": {"name": "n", "labels": {"a": 2}}})
    assert store.get("", "n") == Namespace("n", {"a": "1"}) and store.generation == 1


def test_generation_of_several_kinds_changes_with_any_of_them() -> None:
    objects = ClusterObjects(WATCHED_KINDS)
    before = objects.generation(SERVICES, REPLICA_SETS)
    objects.store(NAMESPACES).upsert({"metadata": {"name": "n"}})
    assert objects.generation(SERVICES, REPLICA_SETS) == before
    objects.store(REPLICA_SETS).upsert(_obj("ReplicaSet", "r"))
    assert objects.generation(SERVICES, REPLICA_SETS) != before


def test_kinds_know_where_the_api_serves_them() -> None:
    assert [k.list_path for k in WATCHED_KINDS] == [
        "/api/v1/namespaces",
        "/api/v1/services",
        "/api/v1/replicationcontrollers",
        "/apis/apps/v1/replicasets",
        "/apis/apps/v1/statefulsets",
        "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumeclaims",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/apis/storage.k8s.io/v1/csinodes",
        "/apis/storage.k8s.io/v1/csidrivers",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        "/apis/storage.k8s.io/v1/volumeattachments",
        "/apis/resource.k8s.io/v1/deviceclasses",
        "/apis/resource.k8s.io/v1/resourceclaims",
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1/devicetaintrules",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
        "/apis/scheduling.k8s.io/v1beta1/podgroups",
    ]
