"""What an extender's answer may name, and how much, over real HTTP on loopback: a filter answer passes
only nodes it was sent (each once) and reports failures only for those; a prioritize answer scores at
most the nodes it was sent, and its weighted scores fit a node's int64 total; a preempt answer names each
victim once and no more PDB violations than victims."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kopf_scheduler.api.extenders import ExtenderSpec
from kopf_scheduler.framework.extenders import ExtenderError, ExtenderTransport, HTTPExtender
from kopf_scheduler.framework.extenders import scheduling as extending
from kopf_scheduler.framework.extenders.wire import INT64_MAX
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status
from kopf_scheduler.testing import make_pod
from kopf_scheduler.testing.extender_server import Answer, FakeExtender, node_snapshot

POD = PodInfo(make_pod().name("p").namespace("ns").uid("u1").priority(100).req(cpu="1").obj())


def _nodes(answer: dict[str, Any]) -> dict[str, Any]:
    """A filter answer with ``Nodes`` as objects (``{"Nodes": ["n1"]}`` -> a NodeList of n1)."""
    names = answer.pop("Nodes")
    return {**answer, "Nodes": {"items": [{"metadata": {"name": n}} for n in names]}}


# -- filter ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cache_capable", [True, False], ids=["node-names", "node-objects"])
async def test_a_filter_answer_may_pass_only_nodes_it_was_sent(
    transport: ExtenderTransport, cache_capable: bool
) -> None:
    """Upstream checks ``NodeNames`` of a cache-capable extender and takes any Node objects from the
    others, even nodes the filter plugins rejected: here both must be among the nodes sent."""
    snapshot = node_snapshot("n1", "n2", "n3")
    answer = {"NodeNames": ["n1", "n3"]} if cache_capable else _nodes({"Nodes": ["n1", "n3"]})
    with FakeExtender({"filter": Answer(answer)}) as fake:
        ext = HTTPExtender(
            ExtenderSpec(fake.url, filter_verb="filter", node_cache_capable=cache_capable), transport
        )
        with pytest.raises(ExtenderError) as e:
            await ext.filter(POD, snapshot.node_infos[:2])  # n3 was not sent: a filter plugin refused it
    assert str(e.value) == (
        f'extender "{fake.url}" claims a filtered node "n3" which is not found in the input node list'
    )


@pytest.mark.parametrize("cache_capable", [True, False], ids=["node-names", "node-objects"])
async def test_a_node_passed_twice_counts_once(transport: ExtenderTransport, cache_capable: bool) -> None:
    snapshot = node_snapshot("n1", "n2")
    names = ["n2", "n1", "n2", "n2"]
    answer = {"NodeNames": names} if cache_capable else _nodes({"Nodes": names})
    with FakeExtender({"filter": Answer(answer)}) as fake:
        ext = HTTPExtender(
            ExtenderSpec(fake.url, filter_verb="filter", node_cache_capable=cache_capable), transport
        )
        rows = await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(2), snapshot, lambda *_: None
        )
    assert rows.tolist() == [1, 0]


async def test_failures_reported_for_nodes_not_sent_are_ignored(transport: ExtenderTransport) -> None:
    """Upstream records a verdict for any name in ``FailedNodes``, so an extender could add nodes it was
    never asked about to the FailedScheduling count; only the nodes sent get one here."""
    snapshot = node_snapshot("n1", "n2", "n3")
    answer = {
        "NodeNames": ["n1"],
        "FailedNodes": {"n2": "busy", "n3": "busy", "ghost": "busy"},
        "FailedAndUnresolvableNodes": {"n3": "far", "ghost-2": "far"},
    }
    statuses: dict[str, Status] = {}
    with FakeExtender({"filter": Answer(answer)}) as fake:
        ext = HTTPExtender(ExtenderSpec(fake.url, filter_verb="filter", node_cache_capable=True), transport)
        await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(2), snapshot, statuses.__setitem__
        )
    assert {name: status.message() for name, status in statuses.items()} == {"n2": "busy"}


# -- prioritize -----------------------------------------------------------------------------------------
async def test_a_prioritize_answer_scores_at_most_the_nodes_it_was_sent(transport: ExtenderTransport) -> None:
    """Upstream adds up whatever the list holds (a host named twice counts twice); a list longer than
    the nodes sent is refused here, so one answer cannot multiply a node's score."""
    snapshot = node_snapshot("n1", "n2")
    scores = [{"Host": "n1", "Score": 10}] * 3
    with FakeExtender({"prioritize": Answer(scores)}) as fake:
        ext = HTTPExtender(ExtenderSpec(fake.url, prioritize_verb="prioritize", weight=1), transport)
        with pytest.raises(ExtenderError) as e:
            await ext.prioritize(POD, snapshot.node_infos)
    assert str(e.value) == f"extender {fake.url} answered 3 scores for the 2 nodes it was sent"


@pytest.mark.parametrize(
    ("weight", "score"),
    [(1, INT64_MAX), (1, -INT64_MAX), (10**15, 10**4)],
    ids=["int64-max", "int64-min", "huge-weight"],
)
async def test_weighted_scores_that_no_node_total_can_hold_cost_that_extenders_scores(
    transport: ExtenderTransport, weight: int, score: int
) -> None:
    """Upstream multiplies score x weight x 10 in int64 and wraps; here an extender whose weighted score
    for a node exceeds ``MAX_WEIGHTED_EXTENDER_SCORE`` gives no score, as any failed prioritize call, and
    the others count."""
    snapshot = node_snapshot("n1", "n2")
    with (
        FakeExtender({"prioritize": Answer([{"Host": "n1", "Score": score}])}) as bad,
        FakeExtender({"prioritize": Answer([{"Host": "n2", "Score": 3}])}) as good,
    ):
        extenders = [
            HTTPExtender(ExtenderSpec(bad.url, prioritize_verb="prioritize", weight=weight), transport),
            HTTPExtender(ExtenderSpec(good.url, prioritize_verb="prioritize", weight=2), transport),
        ]
        total, per_extender = await extending.prioritize(extenders, POD, snapshot.node_infos)
    assert total.tolist() == [0, 3 * 2 * 10]
    assert list(per_extender) == [good.url]


async def test_the_largest_weighted_score_still_leaves_room_for_every_other_score() -> None:
    assert extending.MAX_WEIGHTED_EXTENDER_SCORE * (extending.MAX_EXTENDERS + 1) < INT64_MAX


# -- preempt --------------------------------------------------------------------------------------------
def _victim(name: str, priority: int = 1) -> PodInfo:
    return PodInfo(make_pod().name(name).namespace("ns").uid(name).node("n1").priority(priority).obj())


@pytest.mark.parametrize(
    ("answer", "kept", "error"),
    [
        ({"Pods": [{"UID": "a"}, {"UID": "a"}, {"UID": "b"}], "NumPDBViolations": 1}, (["a", "b"], 1), ""),
        ({"Pods": [{"UID": "a"}], "NumPDBViolations": 2}, None, "2 PDB violations for 1 victim(s)"),
        ({"Pods": [{"UID": "a"}], "NumPDBViolations": -1}, None, "-1 PDB violations for 1 victim(s)"),
    ],
    ids=["a-victim-named-twice", "more-violations-than-victims", "negative-violations"],
)
async def test_a_preempt_answer_names_each_victim_once_and_no_more_violations_than_victims(
    transport: ExtenderTransport, answer: dict[str, Any], kept: Any, error: str
) -> None:
    """Upstream takes the list and the count as they come (a victim named twice is deleted twice; the
    count orders the candidates); here a victim counts once and the count must lie in 0..victims."""
    snapshot = node_snapshot("n1")
    a, b = _victim("a"), _victim("b")
    for pod in (a, b):
        snapshot.node_infos[0].add_pod(pod)
    with FakeExtender({"preempt": Answer({"NodeNameToMetaVictims": {"n1": answer}})}) as fake:
        ext = HTTPExtender(ExtenderSpec(fake.url, preempt_verb="preempt", node_cache_capable=True), transport)
        if error:
            with pytest.raises(ExtenderError) as e:
                await ext.process_preemption(POD, {"n1": ([a, b], 0)}, snapshot)
            assert str(e.value) == f"extender: {fake.url} claims {error} on node: n1"
            return
        result = await ext.process_preemption(POD, {"n1": ([a, b], 0)}, snapshot)
    victims = result["n1"]
    assert victims is not None
    assert ([p.uid for p in victims[0]], victims[1]) == kept
