"""The FailedScheduling message, exactly as kube-scheduler's ``FitError.Error`` builds it."""

from collections.abc import Iterator

import pytest

from kopf_scheduler.framework.diagnosis import Diagnosis, FitError, truncate_event_message
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable, unschedulable
from kopf_scheduler.testing import make_pod

CPU = unschedulable("Insufficient cpu", plugin="NodeResourcesFit")
CPU_MEM = unschedulable("Insufficient cpu", "Insufficient memory", plugin="NodeResourcesFit")
CORDONED = unresolvable("node(s) were unschedulable", plugin="NodeUnschedulable")
NAME = unresolvable("node(s) didn't match the requested node name", plugin="NodeName")
TAINT = unresolvable(
    "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }", plugin="TaintToleration"
)
SPREAD = "node(s) didn't satisfy plugin(s) [NodeAffinity PodTopologySpread] simultaneously"
PREEMPTION = (
    "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
    "2 No preemption victims found for incoming pod."
)


class StatusMap:
    def __init__(self, statuses: dict[str, Status]) -> None:
        self._statuses = statuses

    def get(self, name: str) -> Status | None:
        return self._statuses.get(name)

    def items(self) -> Iterator[tuple[str, Status]]:
        return iter(self._statuses.items())

    def __len__(self) -> int:
        return len(self._statuses)


def _nodes(*statuses: Status) -> StatusMap:
    return StatusMap({f"n{i}": s for i, s in enumerate(statuses)})


@pytest.mark.parametrize(
    ("num_nodes", "diagnosis", "message"),
    [
        (
            3,
            Diagnosis(_nodes(NAME, CPU, CPU)),
            "0/3 nodes are available: 1 node(s) didn't match the requested node name, 2 Insufficient cpu.",
        ),
        (
            2,
            Diagnosis(_nodes(CPU, unschedulable("Insufficient cpu", plugin="NodeResourcesFit"))),
            "0/2 nodes are available: 2 Insufficient cpu.",
        ),
        (
            12,
            Diagnosis(_nodes(*[CORDONED] * 10, CPU, CPU)),
            "0/12 nodes are available: 10 node(s) were unschedulable, 2 Insufficient cpu.",
        ),
        (
            2,
            Diagnosis(_nodes(CPU_MEM, CPU)),
            "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu.",
        ),
        (
            5,
            Diagnosis(
                _nodes(CPU), absent_status=unresolvable("node(s) didn't satisfy plugin(s) [NodeAffinity]")
            ),
            "0/5 nodes are available: 1 Insufficient cpu, 4 node(s) didn't satisfy plugin(s) [NodeAffinity].",
        ),
        (
            2,
            Diagnosis(_nodes(CPU, CPU), absent_status=unresolvable("never counted")),
            "0/2 nodes are available: 2 Insufficient cpu.",
        ),
        (
            3,
            Diagnosis(
                _nodes(CPU),
                absent_status=unresolvable("x"),
                pre_filter_message=SPREAD,
            ),
            f"0/3 nodes are available: {SPREAD}.",
        ),
        (
            3,
            Diagnosis(_nodes(TAINT, CPU, CPU), post_filter_message=PREEMPTION),
            "0/3 nodes are available: "
            "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
            "2 Insufficient cpu. " + PREEMPTION,
        ),
        (
            1,
            Diagnosis(
                pre_filter_message="too big",
                post_filter_message="preemption: not eligible due to preemptionPolicy=Never.",
            ),
            "0/1 nodes are available: too big. preemption: not eligible due to preemptionPolicy=Never.",
        ),
        (0, Diagnosis(_nodes()), "0/0 nodes are available:"),
    ],
    ids=[
        "histogram",
        "equal-verdicts-counted-together",
        "sorted-as-strings",
        "node-counted-once-per-reason",
        "absent-nodes",
        "absent-status-unused-when-all-counted",
        "pre-filter-replaces-histogram",
        "post-filter-appended",
        "pre-and-post-filter",
        "no-nodes",
    ],
)
def test_fit_error_message(num_nodes: int, diagnosis: Diagnosis, message: str) -> None:
    pod = PodInfo(make_pod().name("p").obj())
    assert str(FitError(pod, num_nodes, diagnosis)) == message


@pytest.mark.parametrize(
    ("length", "expected_length", "truncated"),
    [(10, 10, False), (1024, 1024, False), (1025, 1024, True), (5000, 1024, True)],
    ids=["short", "at-limit", "one-over", "long"],
)
def test_truncate_event_message(length: int, expected_length: int, truncated: bool) -> None:
    message = "".join(chr(ord("a") + i % 26) for i in range(length))
    out = truncate_event_message(message)
    assert len(out) == expected_length
    if truncated:
        assert out == message[:1020] + " ..."
    else:
        assert out == message
