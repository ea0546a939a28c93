"""deploy/rbac.yaml grants each watched kind exactly what the scheduler does with it: list and watch for
its informer-like store, plus the writes a plugin makes (the volume binder's PUTs of volumes and
claims). A kind added to ``WATCHED_KINDS`` needs an entry here, and so a decision about its verbs."""

from __future__ import annotations

from pathlib import Path

import yaml

from kopf_scheduler.framework.objects import WATCHED_KINDS

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"

READ = frozenset({"list", "watch"})
#: (API group, resource) -> the verbs the ClusterRole must grant, no more and no less
EXPECTED_VERBS: dict[tuple[str, str], frozenset[str]] = {
    ("", "namespaces"): READ,
    ("", "services"): READ,
    ("", "replicationcontrollers"): READ,
    ("apps", "replicasets"): READ,
    ("apps", "statefulsets"): READ,
    # VolumeBinding's pre-bind: a volume's claimRef, a claim's volume.kubernetes.io/selected-node
    ("", "persistentvolumes"): READ | {"update"},
    ("", "persistentvolumeclaims"): READ | {"update"},
    ("storage.k8s.io", "storageclasses"): READ,
    ("storage.k8s.io", "csinodes"): READ,
    ("storage.k8s.io", "csidrivers"): READ,
    ("storage.k8s.io", "csistoragecapacities"): READ,
    ("storage.k8s.io", "volumeattachments"): READ,
    ("resource.k8s.io", "deviceclasses"): READ,
    ("resource.k8s.io", "resourceslices"): READ,
    ("resource.k8s.io", "resourceclaimtemplates"): READ,
    ("resource.k8s.io", "devicetaintrules"): READ,
    # DynamicResources' pre-bind: the finalizer of a claim it allocates (a GET after a conflict)
    ("resource.k8s.io", "resourceclaims"): READ | {"get", "update"},
    # Coscheduling reads PodGroups; their status goes through podgroups/status (patch), another resource
    ("scheduling.x-k8s.io", "podgroups"): READ,
    # GangScheduling reads the Workload API's PodGroups; their condition goes through podgroups/status
    ("scheduling.k8s.io", "podgroups"): READ,
}


def _cluster_role_verbs() -> dict[tuple[str, str], set[str]]:
    role = next(doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc["kind"] == "ClusterRole")
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def test_every_watched_kind_has_exactly_its_expected_verbs() -> None:
    verbs = _cluster_role_verbs()
    for kind in WATCHED_KINDS:
        key = (kind.group, kind.plural)
        assert key in EXPECTED_VERBS, f"{kind}: add its verbs to EXPECTED_VERBS"
        assert verbs.get(key) == EXPECTED_VERBS[key], kind
