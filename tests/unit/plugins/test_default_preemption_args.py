"""DefaultPreemptionArgs: defaults, validation as upstream's ``ValidateDefaultPreemptionArgs``, decoding
from a profile, and how many candidates the dry run wants (``calculateNumCandidates``)."""

from __future__ import annotations

import pytest
from _preemption_kit import PROFILE

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.plugins.default_preemption import Args, DefaultPreemption
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.simulate.client import SimulatedCluster


def test_defaults() -> None:
    assert Args() == Args(min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100)
    Args().validate()


@pytest.mark.parametrize(
    ("percentage", "absolute", "field", "message"),
    [
        pytest.param(10, 100, None, None, id="defaults"),
        pytest.param(0, 100, None, None, id="percentage-zero"),
        pytest.param(100, 0, None, None, id="absolute-zero"),
        pytest.param(
            -1, 100, "minCandidateNodesPercentage", "-1: not in valid range [0, 100]", id="negative-pct"
        ),
        pytest.param(
            101, 100, "minCandidateNodesPercentage", "101: not in valid range [0, 100]", id="pct-over"
        ),
        pytest.param(
            10, -1, "minCandidateNodesAbsolute", "-1: not in valid range [0, inf)", id="negative-abs"
        ),
        pytest.param(
            0,
            0,
            "minCandidateNodesPercentage",
            "0: cannot be zero at the same time as minCandidateNodesAbsolute",
            id="both-zero",
        ),
    ],
)
def test_validate(percentage: int, absolute: int, field: str | None, message: str | None) -> None:
    args = Args(min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)
    if field is None:
        args.validate()
        return
    with pytest.raises(ArgsError) as caught:
        args.validate()
    assert (caught.value.field, caught.value.message) == (field, message)


def test_decoded_from_camel_case() -> None:
    args = decode_args(Args, {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 5})
    assert args == Args(20, 5)
    with pytest.raises(ArgsError):
        decode_args(Args, {"minCandidateNodes": 5})


def test_profile_args_reach_the_plugin_and_bad_ones_name_the_field() -> None:
    sched = Scheduler(SimulatedCluster())
    config = {"DefaultPreemption": ({"minCandidateNodesAbsolute": 7}, "spec.pluginConfig[0].args")}
    framework = sched.build_profile(ProfileSpec(PROFILE, plugin_config=config))
    plugin = framework.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    assert plugin.args == Args(10, 7)
    # upstream's order: DynamicResources' post-filter runs before preemption
    assert [p.name for p in framework.post_filter] == ["DynamicResources", "DefaultPreemption"]
    assert framework.post_filter[-1] is plugin
    bad = {"DefaultPreemption": ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "args")}
    with pytest.raises(ProfileError) as caught:
        sched.build_profile(ProfileSpec(PROFILE, plugin_config=bad))
    assert "args.minCandidateNodesPercentage" in str(caught.value)


@pytest.mark.parametrize(
    ("percentage", "absolute", "nodes", "expected"),
    [
        pytest.param(10, 100, 0, 0, id="no-nodes"),
        pytest.param(10, 100, 50, 50, id="fewer-nodes-than-absolute"),
        pytest.param(10, 100, 1000, 100, id="absolute-wins"),
        pytest.param(10, 100, 5000, 500, id="percentage-wins"),
        pytest.param(40, 10, 99, 39, id="percentage-rounds-down"),
        pytest.param(0, 5, 100, 5, id="percentage-zero"),
        pytest.param(100, 0, 7, 7, id="all-nodes"),
    ],
)
def test_num_candidates(percentage: int, absolute: int, nodes: int, expected: int) -> None:
    assert Args(percentage, absolute).num_candidates(nodes) == expected
