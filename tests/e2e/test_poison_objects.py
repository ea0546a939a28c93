"""No object stops the running operator: a bounded number of objects of every kind the scheduler reads,
drawn from the poison tier's strategies (tests/poison/poison_strategies.py: valid ones, built or drawn from
the API server's OpenAPI schema, and ones pushed to the extremes of their schema), are created against the
real API server; what the API server refuses is counted, not a failure. Then a canary pod must still bind,
and the operator's log has no traceback and no error line. The schema the strategies draw from
(tests/poison/openapi/kube-apiserver.json) must equal what this API server serves."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from operator_harness import PROFILES, Operators, Scope

from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "poison"))
from openapi_schema import SCHEMA_FILE, dumps, load, served, trim
from poison_strategies import KINDS, poison

pytestmark = pytest.mark.e2e

#: objects of each kind offered to the API server
PER_KIND = 30
#: kind -> (collection path, namespaced)
PATHS = {
    "Pod": ("/api/v1/namespaces/{ns}/pods", True),
    "Node": ("/api/v1/nodes", False),
    "PersistentVolumeClaim": ("/api/v1/namespaces/{ns}/persistentvolumeclaims", True),
    "PersistentVolume": ("/api/v1/persistentvolumes", False),
    "Service": ("/api/v1/namespaces/{ns}/services", True),
    "ResourceClaim": ("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", True),
    "ResourceSlice": ("/apis/resource.k8s.io/v1/resourceslices", False),
    "StorageClass": ("/apis/storage.k8s.io/v1/storageclasses", False),
    "CSINode": ("/apis/storage.k8s.io/v1/csinodes", False),
    "CSIDriver": ("/apis/storage.k8s.io/v1/csidrivers", False),
    "DeviceClass": ("/apis/resource.k8s.io/v1/deviceclasses", False),
    "PodDisruptionBudget": ("/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", True),
    "SchedulingProfile": (PROFILES, False),
}
#: kind -> the API server's first refusal, printed for a reader of the log
FIRST_REFUSAL: dict[str, str] = {}
DRAWS = settings(
    max_examples=PER_KIND,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def _offer(
    cp: ClusterHarness, scope: Scope, kind: str, obj: dict[str, Any], i: int, counts: Counter[str]
) -> None:
    """Creates ``obj`` under this test's name (so that cleanup finds it); the API server may refuse it."""
    collection, namespaced = PATHS[kind]
    collection = collection.format(ns=scope.namespace)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["name"] = scope.name(f"poison-{kind.lower()}-{i}")
    if namespaced:
        meta["namespace"] = scope.namespace
    if kind == "Pod" and isinstance(obj.get("spec"), dict):
        obj["spec"]["schedulerName"] = "kopf-scheduler"  # the operator is the one to read it
    try:
        # no Warning header per unknown field (hundreds of them overflow the client's header limit)
        cp.post(f"{collection}?fieldValidation=Ignore", obj)
    except ApiError as e:
        counts[f"{kind} refused"] += 1
        FIRST_REFUSAL.setdefault(kind, str(e)[:300])
        return
    counts[f"{kind} stored"] += 1
    scope.delete_later(f"{collection}/{meta['name']}")


def _offer_drawn(cp: ClusterHarness, scope: Scope, kind: str, counts: Counter[str]) -> None:
    """Offers ``PER_KIND`` objects of ``kind`` (the same ones each run)."""
    drawn = iter(range(PER_KIND * 10))

    @DRAWS
    @given(obj=poison(kind))
    def offer(obj: dict[str, Any]) -> None:
        _offer(cp, scope, kind, obj, next(drawn), counts)

    offer()


def test_poison_objects_leave_the_canary_bound_and_the_log_clean(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(2, cpu="64", memory="256Gi", pods="500")
    operator = operators.start("op-poison", lease_namespace=scope.namespace)
    operator.wait_leading()
    counts: Counter[str] = Counter()
    for kind in KINDS:
        _offer_drawn(control_plane, scope, kind, counts)
    print(dict(sorted(counts.items())), FIRST_REFUSAL)
    scope.create_pod("canary")
    assert scope.wait_bound("canary", timeout=60)["spec"]["nodeName"] in nodes
    assert operator.alive
    assert operator.problems() == []


def test_committed_openapi_schemas_equal_what_the_api_server_serves(control_plane: ClusterHarness) -> None:
    """The poison tier draws from a committed copy of the schemas; after a Kubernetes upgrade it must be
    fetched again (``tests/poison/openapi/fetch.py``), or this fails."""
    version = control_plane.get("/version")["gitVersion"]
    trimmed = trim(served(control_plane.get), version)
    assert load()["kubernetesVersion"] == version
    assert dumps(trimmed) == SCHEMA_FILE.read_text(), (
        f"{SCHEMA_FILE} is stale: run {SCHEMA_FILE.parent}/fetch.py"
    )
