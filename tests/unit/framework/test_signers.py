"""What the in-tree plugins sign of a pod (upstream's ``SignPod`` of each plugin and
``k8s.io/kube-scheduler/framework/signers.go`` at v1.37.2), through a profile of the default plugins with
PodTopologySpread's default constraints cleared: which differences between two pods make their signatures
differ, which do not, and which pods are not signed at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.interface import SignPlugin
from kopf_scheduler.framework.objects import DEVICE_CLASSES, WATCHED_KINDS
from kopf_scheduler.framework.objects.extended_resources import device_class_resolver
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status
from kopf_scheduler.plugins.node_resources_balanced_allocation import Args as BalancedArgs
from kopf_scheduler.plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from kopf_scheduler.plugins.node_resources_fit import Args, NodeResourcesFit
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_pod
from kopf_scheduler.testing.builders import PodBuilder

LIST = [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]


def _signer(plugin_config: list[Any], **spec: Any) -> Callable[[PodBuilder], str | None]:
    scheduler = Scheduler(FakeAPI(), clock=VirtualClock())
    scheduler.set_profile(parse_profile({"schedulerName": "s", "pluginConfig": plugin_config, **spec}))
    batch = scheduler.profiles["s"].batch
    assert batch is not None
    return lambda builder: batch.sign_pod(PodInfo(builder.scheduler_name("s").obj()))


def _base() -> PodBuilder:
    return make_pod().name("p").req(cpu="1", memory="1Gi")


def _volume(builder: PodBuilder, volume: dict[str, Any]) -> PodBuilder:
    return builder.set("spec.volumes", [volume])


SAME = {
    "another name and uid": lambda: _base().name("q").uid("other"),
    "tolerations in another order": lambda: (
        _base().toleration("b", value="1").toleration("a", value="2"),
        _base().toleration("a", value="2").toleration("b", value="1"),
    ),
    "a ConfigMap volume": lambda: _volume(_base(), {"name": "cm", "configMap": {"name": "own-config"}}),
    "a Secret volume": lambda: _volume(_base(), {"name": "s", "secret": {"secretName": "own-secret"}}),
    "an untagged image and its :latest": lambda: (_base().image("nginx"), _base().image("nginx:latest")),
    "node affinity values in another order": lambda: (
        _base().affinity(_required(["b", "a"])),
        _base().affinity(_required(["a", "b"])),
    ),
    "a host port's protocol": lambda: (_base().host_port(80, "TCP"), _base().host_port(80, "UDP")),
}

DIFFERENT = {
    "requests": lambda: _base().req(cpu="2", memory="1Gi"),
    "tolerations": lambda: _base().toleration("a"),
    "node selector": lambda: _base().node_selector(disk="ssd"),
    "node affinity": lambda: _base().affinity(_required(["a"])),
    "host ports": lambda: _base().host_port(80),
    "an emptyDir volume": lambda: _volume(_base(), {"name": "scratch", "emptyDir": {}}),
    "images": lambda: _base().image("nginx:1.27"),
    "labels (InterPodAffinity: existing pods' terms may select them)": lambda: _base().label("app", "web"),
    "node name": lambda: _base().node("n1"),
}


def _required(values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _pair(make: Callable[[], Any]) -> tuple[PodBuilder, PodBuilder]:
    made = make()
    return made if isinstance(made, tuple) else (_base(), made)


@pytest.mark.parametrize("make", SAME.values(), ids=SAME.keys())
def test_pods_that_differ_only_where_no_plugin_reads_sign_the_same(make: Callable[[], Any]) -> None:
    sign = _signer(LIST)
    first, second = _pair(make)
    assert sign(first) is not None
    assert sign(first) == sign(second)


@pytest.mark.parametrize("make", DIFFERENT.values(), ids=DIFFERENT.keys())
def test_pods_that_differ_where_a_plugin_reads_sign_differently(make: Callable[[], Any]) -> None:
    sign = _signer(LIST)
    first, second = _pair(make)
    assert sign(first) is not None and sign(second) is not None
    assert sign(first) != sign(second)


UNSIGNED = {
    "pod affinity": lambda: _base().affinity(
        {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    ),
    "pod anti-affinity": lambda: _base().affinity(
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    ),
    "topology spread constraints": lambda: _base().spread(
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ),
    "resource claims": lambda: _base().set(
        "spec.resourceClaims", [{"name": "gpu", "resourceClaimName": "c"}]
    ),
}


@pytest.mark.parametrize("make", UNSIGNED.values(), ids=UNSIGNED.keys())
def test_pods_some_plugin_refuses_are_not_signed(make: Callable[[], Any]) -> None:
    assert _signer(LIST)(make()) is None


def test_under_the_default_profile_no_pod_is_signed() -> None:
    """PodTopologySpread's System defaulting gives it default constraints: it refuses every pod."""
    assert _signer([])(_base()) is None


def test_a_profile_with_a_plugin_that_does_not_sign_signs_nothing() -> None:
    plugins = {
        "queueSort": {"disabled": [{"name": "PrioritySort"}]},
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
    }
    sign = _signer(LIST, plugins=plugins)
    assert sign(_base()) is None


def test_without_labels_signed_when_existing_pods_preferred_terms_are_ignored() -> None:
    args = {"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}}
    sign = _signer([*LIST, args])
    assert sign(_base().label("app", "web")) == sign(_base())


def test_a_request_dra_would_allocate_is_not_signed_by_the_resource_plugins() -> None:
    """With ``DRAExtendedResource``, an extended resource a DeviceClass stands for may be allocated by
    DRA (``shouldDelegateResourceToDRA`` with no node): NodeResourcesFit and
    NodeResourcesBalancedAllocation do not sign such a pod; with the gate off (no resolver) they do."""
    gpu = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"extendedResourceName": "example.com/gpu"},
    }
    store = ClusterObjects(WATCHED_KINDS)
    store.store(DEVICE_CLASSES).upsert(gpu)
    classes = device_class_resolver(store)
    on: list[SignPlugin] = [
        NodeResourcesFit(Args(), classes),
        NodeResourcesBalancedAllocation(BalancedArgs(), classes),
    ]
    off: list[SignPlugin] = [NodeResourcesFit(Args()), NodeResourcesBalancedAllocation(BalancedArgs())]
    gpu_pod = PodInfo(_base().req(cpu="1", **{"example.com/gpu": "1"}).obj())
    fpga_pod = PodInfo(_base().req(cpu="1", **{"example.com/fpga": "1"}).obj())
    assert [isinstance(p.sign_pod(gpu_pod), Status) for p in on] == [True, True]
    assert [isinstance(p.sign_pod(fpga_pod), Status) for p in on] == [False, False]
    assert [isinstance(p.sign_pod(gpu_pod), Status) for p in off] == [False, False]
