"""Persistent volumes through the operator, on the session's real kube-apiserver with
kube-controller-manager (its PV controller binds what the scheduler decides), next to the upstream
kube-scheduler:

- a pod with a claim that only a static local volume can satisfy lands on that volume's node, which the
  volume is then bound to; kube-scheduler, on an identical set of objects, does the same;
- a pod whose claim does not exist, and one whose claim of an Immediate class is not bound, get
  kube-scheduler's FailedScheduling message, word for word.

A StatefulSet whose claims a test provisioner makes, a pod deleted while its PreBind waits and bad volume
input run through both schedulers on two identical fresh clusters in
``test_operator_volumes_vs_kube_scheduler``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_harness import OPERATORS_KEY, Operators, Scope, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

VOLUME_LABEL = "e2e.kopf-scheduler.dev/volumes"
KUBE_SCHEDULER = "default-scheduler"
KOPF_SCHEDULER = "kopf-scheduler"


@pytest.fixture(scope="module")
def kube_scheduler(controller_plane: ClusterHarness) -> Iterator[None]:
    """The upstream kube-scheduler on the controller plane, for the comparisons; stopped after."""
    controller_plane.cluster.start_kube_scheduler()
    try:
        yield
    finally:
        controller_plane.cluster.stop_kube_scheduler()


@pytest.fixture
def volume_operators(
    controller_plane: ClusterHarness, vscope: Scope, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Operators]:
    """As ``operators`` on the controller plane: stopped before ``vscope`` is cleaned up."""
    started = Operators(controller_plane.kubeconfig, tmp_path)
    request.node.stash[OPERATORS_KEY] = started
    try:
        yield started
    finally:
        killed = started.stop_all()
    if killed:
        pytest.fail(f"operator(s) {', '.join(killed)} still running 15 s after SIGTERM")


@pytest.fixture
def vscope(controller_plane: ClusterHarness) -> Iterator[Scope]:
    """This test's namespace and nodes; its claims, volumes and classes are deleted after."""
    made = Scope(controller_plane)
    cp, ns = controller_plane, made.namespace
    try:
        yield made
    finally:
        made.cleanup()
        cp.request("DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", expect=(200,))
        selector = f"{VOLUME_LABEL}%3D{made.run}"
        cp.request("DELETE", f"/api/v1/persistentvolumes?labelSelector={selector}", expect=(200,))
        cp.request(
            "DELETE", f"/apis/storage.k8s.io/v1/storageclasses?labelSelector={VOLUME_LABEL}%3D{made.run}"
        )


def _storage_class(scope: Scope, what: str, provisioner: str, mode: str) -> str:
    name = scope.name(what)
    scope.cp.post(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "labels": {VOLUME_LABEL: scope.run}},
            "provisioner": provisioner,
            "volumeBindingMode": mode,
        },
    )
    return name


def _claim(scope: Scope, name: str, storage_class: str) -> None:
    scope.cp.post(
        f"/api/v1/namespaces/{scope.namespace}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": scope.namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )


def _local_volume(scope: Scope, name: str, node: str, storage_class: str) -> None:
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    scope.cp.post(
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {VOLUME_LABEL: scope.run}},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/disks/e2e"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [hostname]}]}},
            },
        },
    )


def _pod_with_claim(scope: Scope, name: str, claim: str, scheduler: str) -> None:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    scope.create_pod(name, scheduler, volumes=volumes)


def _get(cp: ClusterHarness, path: str) -> dict[str, Any]:
    return dict(cp.get(path))


def _failed_scheduling(scope: Scope, pod: str) -> str:
    message: str = scope.wait_event("FailedScheduling", pod, timeout=30)["message"]
    return message


@pytest.mark.parametrize("scheduler", [KOPF_SCHEDULER, KUBE_SCHEDULER])
def test_a_pod_goes_to_the_node_of_its_static_local_volume(
    controller_plane: ClusterHarness,
    volume_operators: Operators,
    vscope: Scope,
    kube_scheduler: None,
    scheduler: str,
) -> None:
    cp, ns = controller_plane, vscope.namespace
    nodes = vscope.nodes(3)
    storage_class = _storage_class(vscope, "local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    volume = vscope.name("local")
    _local_volume(vscope, volume, nodes[1], storage_class)
    _claim(vscope, "data", storage_class)
    operator = volume_operators.start("op", lease_namespace=ns) if scheduler == KOPF_SCHEDULER else None
    if operator is not None:
        operator.wait_leading()
    _pod_with_claim(vscope, "app", "data", scheduler)
    pod = vscope.wait_bound("app", timeout=30)
    assert pod["spec"]["nodeName"] == nodes[1], dumps(pod)
    bound = wait_until(
        lambda: (
            (c := _get(cp, f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data"))["status"].get("phase")
            == "Bound"
            and c
        ),
        30,
        "the claim Bound",
    )
    assert bound["spec"]["volumeName"] == volume
    assert _get(cp, f"/api/v1/persistentvolumes/{volume}")["spec"]["claimRef"]["name"] == "data"
    assert operator is None or not operator.problems(), operator.problems()


def test_a_missing_claim_and_an_unbound_immediate_claim_get_kube_schedulers_messages(
    controller_plane: ClusterHarness, volume_operators: Operators, vscope: Scope, kube_scheduler: None
) -> None:
    vscope.nodes(2)
    # an Immediate class whose provisioner nobody runs: the claim stays Pending
    immediate = _storage_class(
        vscope, "immediate", f"nobody.{vscope.run}.e2e.kopf-scheduler.dev", "Immediate"
    )
    _claim(vscope, "pending", immediate)
    volume_operators.start("op", lease_namespace=vscope.namespace).wait_leading()
    for scheduler, prefix in ((KOPF_SCHEDULER, "kopf"), (KUBE_SCHEDULER, "kube")):
        _pod_with_claim(vscope, f"{prefix}-missing", "no-such-claim", scheduler)
        _pod_with_claim(vscope, f"{prefix}-immediate", "pending", scheduler)
    for case in ("missing", "immediate"):
        ours, theirs = _failed_scheduling(vscope, f"kopf-{case}"), _failed_scheduling(vscope, f"kube-{case}")
        assert ours == theirs, (case, ours, theirs)
    assert 'persistentvolumeclaim "no-such-claim" not found' in _failed_scheduling(vscope, "kopf-missing")
    assert "pod has unbound immediate PersistentVolumeClaims" in _failed_scheduling(vscope, "kopf-immediate")
