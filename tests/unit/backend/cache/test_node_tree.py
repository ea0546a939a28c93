"""Node order across zones, as upstream's ``nodeTree`` lists it, and ``GetZoneKey``."""

import pytest

from kopf_scheduler.backend.cache.node_tree import NodeTree, zone_key

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"


@pytest.mark.parametrize(
    ("labels", "key"),
    [
        ({}, ""),
        ({"kubernetes.io/hostname": "n1"}, ""),
        ({ZONE: "a"}, ":\x00:a"),
        ({REGION: "r", ZONE: "a"}, "r:\x00:a"),
        ({REGION: "r"}, "r:\x00:"),
        ({BETA_ZONE: "a", BETA_REGION: "r"}, "r:\x00:a"),
        # the deprecated labels are looked up first, as component-helpers' GetZoneKey does
        ({BETA_ZONE: "old", ZONE: "new"}, ":\x00:old"),
        ({ZONE: "", REGION: ""}, ""),
    ],
    ids=[
        "none",
        "unrelated",
        "zone",
        "region-and-zone",
        "region-only",
        "beta-labels",
        "beta-first",
        "empty-values",
    ],
)
def test_zone_key(labels: dict[str, str], key: str) -> None:
    assert zone_key(labels) == key


def test_round_robin_over_zones_in_order_of_first_appearance() -> None:
    tree = NodeTree()
    for name, zone in [("a1", "a"), ("b1", "b"), ("a2", "a"), ("a3", "a"), ("c1", "c"), ("b2", "b")]:
        tree.add(name, {ZONE: zone})
    assert tree.ordered() == ["a1", "b1", "c1", "a2", "b2", "a3"]
    assert len(tree) == 6


def test_remove_and_rezone() -> None:
    tree = NodeTree()
    for name, zone in [("a1", "a"), ("b1", "b"), ("a2", "a")]:
        tree.add(name, {ZONE: zone})
    tree.remove("b1")  # zone b empties and is dropped; re-adding it puts it last
    tree.add("b1", {ZONE: "b"})
    tree.add("c1", {ZONE: "c"})
    assert tree.ordered() == ["a1", "b1", "c1", "a2"]
    tree.add("a1", {ZONE: "c"})
    assert tree.ordered() == ["a2", "b1", "c1", "a1"]
    tree.add("a2", {ZONE: "a"})  # unchanged zone: no move
    assert tree.ordered() == ["a2", "b1", "c1", "a1"]
    tree.remove("missing")
    assert len(tree) == 4


def test_beta_zone_labels_group_nodes() -> None:
    tree = NodeTree()
    tree.add("x1", {BETA_ZONE: "x"})
    tree.add("n1", {})
    tree.add("x2", {BETA_ZONE: "x"})
    tree.add("y1", {ZONE: "y"})
    assert tree.ordered() == ["x1", "n1", "y1", "x2"]
