"""NodePorts: pre-filter skip, host-port conflicts (0.0.0.0 against any IP), sidecar ports, the
requeue hint for deleted pods, and the vectorised filter."""

from __future__ import annotations

from typing import Any

import pytest
from _node_plugins_kit import FakeHandle, all_rows, node_info, snapshot_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import QueueingHint
from kopf_scheduler.framework.pod_info import HostPort, PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status
from kopf_scheduler.plugins.node_ports import ERR_REASON, NodePorts, new
from kopf_scheduler.plugins.node_ports.plugin import pod_deleted as hint
from kopf_scheduler.testing import make_node, make_pod

CONFLICT = Status(Code.UNSCHEDULABLE, (ERR_REASON,))


def _pod_dict(*ports: str, node: str = "", name: str = "p") -> dict[str, Any]:
    """Ports as ``PROTOCOL/IP/PORT`` (an empty IP means unset)."""
    container: dict[str, Any] = {"name": "c", "image": "x", "ports": []}
    for spec in ports:
        protocol, ip, port = spec.split("/")
        entry: dict[str, Any] = {"containerPort": int(port), "hostPort": int(port), "protocol": protocol}
        if ip:
            entry["hostIP"] = ip
        container["ports"].append(entry)
    builder = make_pod().name(name).set("spec.containers", [container])
    if node:
        builder.node(node)
    return builder.obj()


def _plugin(snapshot: Any = None) -> NodePorts:
    return new(NoArgs(), FakeHandle(snapshot))


@pytest.mark.parametrize(
    ("wanted", "existing", "want"),
    [
        pytest.param(["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None, id="other-port"),
        pytest.param(["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], CONFLICT, id="same-udp-port"),
        pytest.param(["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], CONFLICT, id="same-tcp-port"),
        pytest.param(["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None, id="different-host-ip"),
        pytest.param(["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None, id="different-protocol"),
        pytest.param(
            ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
            ["UDP/127.0.0.1/8080"],
            CONFLICT,
            id="second-port-conflict",
        ),
        pytest.param(
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
            CONFLICT,
            id="first-port-conflict",
        ),
        pytest.param(["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], CONFLICT, id="wanted-bind-all"),
        pytest.param(
            ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
            ["TCP/127.0.0.1/8001"],
            CONFLICT,
            id="second-wanted-bind-all",
        ),
        pytest.param(["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], CONFLICT, id="used-bind-all"),
        pytest.param(["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None, id="bind-all-other-protocol"),
        pytest.param(
            ["UDP/127.0.0.1/8001"],
            ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
            CONFLICT,
            id="udp-bind-all-conflict",
        ),
        pytest.param(["TCP//8001"], ["TCP/10.1.1.1/8001"], CONFLICT, id="unset-ip-is-bind-all"),
        pytest.param(["TCP/10.1.1.1/8001"], [], None, id="empty-node"),
    ],
)
def test_filter(wanted: list[str], existing: list[str], want: Status | None) -> None:
    plugin, state, pod = _plugin(), CycleState(), PodInfo(_pod_dict(*wanted))
    assert plugin.pre_filter(state, pod, []) == (None, None)
    node = node_info(
        make_node().name("m1").obj(), [_pod_dict(*existing, node="m1", name="old")] if existing else []
    )
    assert plugin.filter(state, pod, node) == want


def test_pre_filter_skips_pods_without_host_ports() -> None:
    pod = PodInfo(make_pod().name("p").obj())
    assert _plugin().pre_filter(CycleState(), pod, []) == (None, SKIP)


def _with_init(restart_policy: str | None) -> PodInfo:
    init: dict[str, Any] = {"name": "i", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80}]}
    if restart_policy:
        init["restartPolicy"] = restart_policy
    return PodInfo(make_pod().name("p").set("spec.initContainers", [init]).obj())


@pytest.mark.parametrize(
    ("restart_policy", "want"),
    [
        pytest.param("Always", (HostPort("TCP", "0.0.0.0", 80),), id="sidecar-port-counts"),
        pytest.param(None, (), id="init-container-port-ignored"),
    ],
)
def test_host_ports_of_init_containers(restart_policy: str | None, want: tuple[HostPort, ...]) -> None:
    assert _with_init(restart_policy).host_ports == want


@pytest.mark.parametrize(
    ("old", "want"),
    [
        pytest.param("not-a-pod", QueueingHint.QUEUE, id="wrong-old-object"),
        pytest.param(make_pod().name("o").obj(), QueueingHint.SKIP, id="unscheduled-pod"),
        pytest.param(make_pod().name("o").node("n").obj(), QueueingHint.SKIP, id="no-host-ports"),
        pytest.param(
            make_pod().name("o").node("n").host_port(8081).obj(), QueueingHint.SKIP, id="unrelated-port"
        ),
        pytest.param(
            make_pod().name("o").node("n").host_port(8080).obj(), QueueingHint.QUEUE, id="released-port"
        ),
        pytest.param(
            make_pod().name("o").nominated("n").host_port(8080).obj(), QueueingHint.QUEUE, id="nominated"
        ),
    ],
)
def test_pod_deleted_hint(old: Any, want: QueueingHint) -> None:
    pod = PodInfo(make_pod().name("p").host_port(8080).obj())
    assert hint(pod, PodInfo(old) if isinstance(old, dict) else old, None) == want


# -- vectorised form -------------------------------------------------------------------------------------
PORT = st.builds(
    lambda proto, ip, port: f"{proto}/{ip}/{port}",
    st.sampled_from(["TCP", "UDP"]),
    st.sampled_from(["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([80, 443]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(PORT, max_size=3), min_size=1, max_size=8), st.lists(PORT, min_size=1, max_size=3))
def test_vector_filter_agrees(existing: list[list[str]], wanted: list[str]) -> None:
    nodes = [make_node().name(f"n{i}").obj() for i in range(len(existing))]
    pods = [_pod_dict(*ports, node=f"n{i}", name=f"e{i}") for i, ports in enumerate(existing) if ports]
    snapshot = snapshot_of(nodes, pods)
    plugin, state, pod = _plugin(snapshot), CycleState(), PodInfo(_pod_dict(*wanted))
    plugin.pre_filter(state, pod, snapshot.node_infos)
    rows = all_rows(snapshot)
    assert plugin.filter_rows(state, pod, snapshot.table, rows).tolist() == [
        plugin.filter(state, pod, n) is None for n in snapshot.node_infos
    ]
