"""PodTopologySpread's default constraints: the selector deduced from the Services and controllers that
select or own a pod (upstream's ``helper.DefaultSelector`` and its test table), and the constraints a pod
gets from it under System and List defaulting."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.pod_topology_spread.default_selector import default_selection
from kopf_scheduler.testing import make_pod


def _service(name: str, selector: dict[str, str] | None, namespace: str = "default") -> dict[str, Any]:
    spec = {"selector": selector} if selector is not None else {}
    return {"kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _owner_object(kind: str, name: str, selector: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": {"selector": selector}}


def _ref(
    kind: str, name: str, api_version: str = "apps/v1", controller: bool | None = True
) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u-" + name}
    if controller is not None:
        ref["controller"] = controller
    return ref


def _pod(labels: dict[str, str], *owners: dict[str, Any], namespace: str = "default") -> PodInfo:
    builder = make_pod().name("p").namespace(namespace)
    for key, value in labels.items():
        builder.label(key, value)
    raw = builder.obj()
    if owners:
        raw["metadata"]["ownerReferences"] = list(owners)
    return PodInfo(raw)


def _objects(*raws: dict[str, Any]) -> ClusterObjects:
    objects = ClusterObjects(WATCHED_KINDS)
    kinds = {kind.kind: kind for kind in WATCHED_KINDS}
    for raw in raws:
        objects.store(kinds[raw["kind"]]).upsert(raw)
    return objects


RS = _owner_object("ReplicaSet", "rs", {"matchLabels": {"app": "web"}})
SS = _owner_object("StatefulSet", "ss", {"matchExpressions": [{"key": "app", "operator": "Exists"}]})
RC = _owner_object("ReplicationController", "rc", {"app": "web", "rc": "yes"})
WEB = {"app": "web", "rc": "yes", "tier": "front"}

CASES = [
    # (id, objects, pod labels, owner refs, expected selector as strings, expected sources)
    ("nothing-selects-the-pod", [], WEB, [], None, []),
    (
        "a-service-selects-it",
        [_service("web", {"app": "web"})],
        WEB,
        [],
        ["app In web"],
        ["Service default/web"],
    ),
    ("a-service-of-another-namespace", [_service("web", {"app": "web"}, "other")], WEB, [], None, []),
    ("a-service-that-does-not-match", [_service("db", {"app": "db"})], WEB, [], None, []),
    ("a-service-without-a-selector-selects-nothing", [_service("ext", None)], WEB, [], None, []),
    (
        "two-services-merge",
        [_service("web", {"app": "web"}), _service("front", {"tier": "front"})],
        WEB,
        [],
        ["app In web", "tier In front"],
        ["Service default/front", "Service default/web"],
    ),
    ("replica-set-owner", [RS], WEB, [_ref("ReplicaSet", "rs")], ["app In web"], ["ReplicaSet default/rs"]),
    ("owner-not-the-controller", [RS], WEB, [_ref("ReplicaSet", "rs", controller=False)], None, []),
    ("owner-without-controller-flag", [RS], WEB, [_ref("ReplicaSet", "rs", controller=None)], None, []),
    ("owner-of-an-old-api-group", [RS], WEB, [_ref("ReplicaSet", "rs", "extensions/v1beta1")], None, []),
    ("owner-not-in-the-store", [], WEB, [_ref("ReplicaSet", "rs")], None, []),
    (
        "stateful-set-owner",
        [SS],
        WEB,
        [_ref("StatefulSet", "ss")],
        ["app Exists"],
        ["StatefulSet default/ss"],
    ),
    (
        "replication-controller-merges-its-map",
        [RC, _service("front", {"tier": "front"})],
        WEB,
        [_ref("ReplicationController", "rc", "v1")],
        ["app In web", "rc In yes", "tier In front"],
        ["Service default/front", "ReplicationController default/rc"],
    ),
    (
        "service-and-replica-set-are-anded",
        [RS, _service("front", {"tier": "front"})],
        WEB,
        [_ref("Deployment", "d", controller=False), _ref("ReplicaSet", "rs")],
        ["app In web", "tier In front"],
        ["Service default/front", "ReplicaSet default/rs"],
    ),
    (
        "controller-with-an-empty-selector-adds-nothing",
        [_owner_object("ReplicaSet", "rs", {})],
        WEB,
        [_ref("ReplicaSet", "rs")],
        None,
        ["ReplicaSet default/rs"],
    ),
]


@pytest.mark.parametrize(
    ("objects", "labels", "owners", "selector", "sources"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_default_selector(
    objects: list[dict[str, Any]],
    labels: dict[str, str],
    owners: list[dict[str, Any]],
    selector: list[str] | None,
    sources: list[str],
) -> None:
    found = default_selection(_objects(*objects), _pod(labels, *owners))
    if selector is None:
        assert found.selector is None
        return
    assert found.selector is not None
    got = sorted(
        f"{r.key} {r.operator} {','.join(sorted(r.values))}".strip() for r in found.selector.requirements
    )
    assert got == sorted(selector)
    assert sorted(found.sources) == sorted(sources)


def test_the_selector_follows_the_services_as_they_change() -> None:
    objects = _objects()
    pod = _pod(WEB)
    assert default_selection(objects, pod).selector is None
    objects.store(WATCHED_KINDS[1]).upsert(_service("web", {"app": "web"}))
    found = default_selection(objects, pod).selector
    assert found is not None and found.matches({"app": "web"}) and not found.matches({"app": "db"})
    objects.store(WATCHED_KINDS[1]).delete("default", "web")
    assert default_selection(objects, pod).selector is None
