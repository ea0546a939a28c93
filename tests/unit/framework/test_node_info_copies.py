"""A NodeInfo copy (what the snapshot and preemption's dry run work on) and its original change
independently: pods, requests and host ports added to or removed from one never show in the other."""

from __future__ import annotations

from collections import Counter

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.testing import make_node, make_pod


def _pod(name: str, port: int) -> PodInfo:
    return PodInfo(make_pod().name(name).uid(name).req(cpu="100m").host_port(port).obj())


def _ports(info: NodeInfo) -> dict[int, int]:
    return {port.port: n for port, n in info.used_ports.items() if n}


def test_a_copy_and_its_original_change_independently() -> None:
    original = NodeInfo(make_node().name("n0").capacity(cpu="4", memory="8Gi", pods=10).obj())
    original.add_pod(_pod("a", 8080))
    copy = original.clone()
    assert _ports(copy) == _ports(original) == {8080: 1}

    copy.add_pod(_pod("b", 9090))
    copy.add_pod(_pod("c", 8080))
    assert _ports(original) == {8080: 1}
    assert sorted(original.pods) == ["a"]
    assert original.requested == {"cpu": 100}

    original.remove_pod(_pod("a", 8080))
    assert _ports(original) == {}
    assert _ports(copy) == {8080: 2, 9090: 1}
    assert copy.requested == {"cpu": 300}

    copy.remove_pod(_pod("c", 8080))
    copy.remove_pod(_pod("a", 8080))
    assert copy.used_ports == Counter({next(iter(_pod("b", 9090).host_ports)): 1})  # no zero counts kept
    assert _ports(original) == {}
