"""The storage values' fields the volume binder reads: a volume's and a claim's attributes class and
deletion, whether a claim requests storage at all, and a CSINode whose kubelet registered no driver."""

from __future__ import annotations

from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from kopf_scheduler.framework.objects.storage import (
    parse_csi_node,
    parse_persistent_volume,
    parse_persistent_volume_claim,
)


def test_claim_fields() -> None:
    raw = {
        "metadata": {"name": "c", "namespace": "ns", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"volumeAttributesClassName": "gold", "resources": {"requests": {"storage": "0"}}},
    }
    claim = parse_persistent_volume_claim(raw)
    assert (claim.attributes_class, claim.deleting, claim.has_request, claim.request) == (
        "gold",
        True,
        True,
        0,
    )
    plain = parse_persistent_volume_claim({"metadata": {"name": "c"}, "spec": {}})
    assert (plain.attributes_class, plain.deleting, plain.has_request) == ("", False, False)


def test_volume_fields() -> None:
    raw = {
        "metadata": {"name": "v", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"volumeAttributesClassName": "gold"},
    }
    volume = parse_persistent_volume(raw)
    assert (volume.attributes_class, volume.deleting) == ("gold", True)
    plain = parse_persistent_volume({"metadata": {"name": "v"}})
    assert (plain.attributes_class, plain.deleting) == ("", False)


def test_a_csi_node_without_drivers() -> None:
    for spec in ({"drivers": []}, {"drivers": None}, {}):
        assert parse_csi_node({"metadata": {"name": "n"}, "spec": spec}).drivers == {}


def test_object_paths() -> None:
    assert PERSISTENT_VOLUMES.object_path("ignored", "pv-1") == "/api/v1/persistentvolumes/pv-1"
    assert (
        PERSISTENT_VOLUME_CLAIMS.object_path("ns", "data")
        == "/api/v1/namespaces/ns/persistentvolumeclaims/data"
    )
    assert STORAGE_CLASSES.object_path("", "fast") == "/apis/storage.k8s.io/v1/storageclasses/fast"
