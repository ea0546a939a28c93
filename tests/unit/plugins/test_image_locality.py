"""ImageLocality: scores from image sizes spread over the nodes holding them, thresholds scaled by the
image count (init containers and image volumes included), name normalisation, and the vectorised
score."""

from __future__ import annotations

from typing import Any

import pytest
from _node_plugins_kit import FakeHandle, all_rows, snapshot_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.node_info import normalized_image_name
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.image_locality import MIN_THRESHOLD, ImageLocality, calculate_priority, new
from kopf_scheduler.testing import make_node, make_pod

MB = 1024 * 1024


def _node(name: str, images: list[tuple[list[str], int]]) -> dict[str, Any]:
    node = make_node().name(name).obj()
    node["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return node


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_300_600_900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]


def _pod(*images: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> PodInfo:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    builder = make_pod().name("p").set("spec.containers", containers)
    if init:
        builder.set(
            "spec.initContainers", [{"name": f"i{i}", "image": image} for i, image in enumerate(init)]
        )
    if volumes:
        builder.set(
            "spec.volumes",
            [{"name": f"v{i}", "image": {"reference": image}} for i, image in enumerate(volumes)],
        )
    return PodInfo(builder.obj())


def _scores(pod: PodInfo, nodes: list[dict[str, Any]]) -> tuple[ImageLocality, Any, list[int]]:
    snapshot = snapshot_of(nodes)
    plugin = new(NoArgs(), FakeHandle(snapshot))
    return plugin, snapshot, [plugin.score(CycleState(), pod, n) for n in snapshot.node_infos]


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        # 40 MiB / 2 nodes is under the 23 MiB floor; 100 * (250/2 - 23) / (2 * 1000 - 23) = 5
        pytest.param(
            _pod("gcr.io/40", "gcr.io/250"),
            [_node("m1", NODE_40_300_2000), _node("m2", NODE_250_10)],
            [0, 5],
            id="larger-image-preferred",
        ),
        # 100 * ((40 + 300) / 2 - 23) / 1977 = 7
        pytest.param(
            _pod("gcr.io/40", "gcr.io/300"),
            [_node("m1", NODE_40_300_2000), _node("m2", NODE_250_10)],
            [7, 0],
            id="both-images-on-one-node",
        ),
        # 100 * (2000 / 2 - 23) / 1977 = 49
        pytest.param(
            _pod("gcr.io/10", "gcr.io/2000"),
            [_node("m1", NODE_40_300_2000), _node("m2", NODE_250_10)],
            [49, 0],
            id="spread-over-two-nodes",
        ),
        # 100 * (2000 / 3 - 23) / 1977 = 32
        pytest.param(
            _pod("gcr.io/10", "gcr.io/2000"),
            [_node("m1", NODE_40_300_2000), _node("m2", NODE_250_10), _node("m3", [])],
            [32, 0, 0],
            id="node-without-images",
        ),
        pytest.param(
            _pod("gcr.io/40", init=("gcr.io/300",)),
            [_node("m1", NODE_40_300_2000), _node("m2", NODE_250_10)],
            [7, 0],
            id="init-containers-count",
        ),
        pytest.param(
            _pod("gcr.io/2000"), [_node("m1", NODE_40_300_2000)], [100], id="clamped-at-one-container-maximum"
        ),
        pytest.param(
            _pod("gcr.io/2000:latest", "gcr.io/2000"),
            [_node("m1", NODE_40_300_2000)],
            [100],
            id="repeated-image-counts-twice",
        ),
        pytest.param(_pod("gcr.io/40:v2"), [_node("m1", NODE_40_300_2000)], [0], id="other-tag-is-absent"),
        # upstream's "pod with ImageVolume" (v1.37.2): the volume's image counts as a container's does;
        # 100 * (300 / 2 - 23) / (1000 * 2 - 23) = 6, and 30 / 2 is under the floor
        pytest.param(
            _pod("gcr.io/30", volumes=("gcr.io/300",)),
            [_node("node1", NODE_300_600_900), _node("node2", NODE_4000_30)],
            [6, 0],
            id="image-volume",
        ),
        pytest.param(
            _pod("gcr.io/30", "gcr.io/300"),
            [_node("node1", NODE_300_600_900), _node("node2", NODE_4000_30)],
            [6, 0],
            id="image-volume-as-container",
        ),
        # an image volume on no node still raises the ceiling: 100 * (300 / 2 - 23) / (2000 - 23) = 6
        # (12 without the volume)
        pytest.param(
            _pod("gcr.io/300", volumes=("gcr.io/nowhere",)),
            [_node("node1", NODE_300_600_900), _node("node2", NODE_4000_30)],
            [6, 0],
            id="absent-image-volume-counts",
        ),
    ],
)
def test_score(pod: PodInfo, nodes: list[dict[str, Any]], want: list[int]) -> None:
    plugin, snapshot, scores = _scores(pod, nodes)
    assert scores == want
    assert plugin.score_rows(CycleState(), pod, snapshot.table, all_rows(snapshot)).tolist() == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param("root", "root:latest", id="untagged"),
        pytest.param("gcr.io:5000/root", "gcr.io:5000/root:latest", id="registry-port"),
        pytest.param("root:tag", "root:tag", id="tagged"),
        pytest.param("root@sha256:abc", "root@sha256:abc", id="digest"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


@pytest.mark.parametrize(
    ("summed", "containers", "want"),
    [
        pytest.param(0, 1, 0, id="below-floor"),
        pytest.param(MIN_THRESHOLD, 1, 0, id="at-floor"),
        pytest.param(1000 * MB, 1, 100, id="at-ceiling"),
        pytest.param(5000 * MB, 2, 100, id="above-ceiling"),
        pytest.param(0, 0, 0, id="no-containers"),
    ],
)
def test_calculate_priority(summed: int, containers: int, want: int) -> None:
    assert calculate_priority(summed, containers) == want


# -- vectorised form -------------------------------------------------------------------------------------
IMAGES = ["a", "b:1", "c", "registry:5000/d"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.dictionaries(st.sampled_from(IMAGES), st.integers(0, 3000 * MB), max_size=4),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.sampled_from([*IMAGES, "a:latest", "e"]), min_size=1, max_size=4),
    st.lists(st.sampled_from(IMAGES), max_size=2),
    st.lists(st.sampled_from([*IMAGES, "f"]), max_size=2),
)
def test_vector_score_agrees(
    node_images: list[dict[str, int]], containers: list[str], init: list[str], volumes: list[str]
) -> None:
    nodes = [
        _node(f"n{i}", [([name], size) for name, size in images.items()])
        for i, images in enumerate(node_images)
    ]
    snapshot = snapshot_of(nodes)
    plugin, pod = (
        new(NoArgs(), FakeHandle(snapshot)),
        _pod(*containers, init=tuple(init), volumes=tuple(volumes)),
    )
    rows = all_rows(snapshot)[::-1].copy()
    assert plugin.score_rows(CycleState(), pod, snapshot.table, rows).tolist() == [
        plugin.score(CycleState(), pod, snapshot.node_infos[r]) for r in rows
    ]
