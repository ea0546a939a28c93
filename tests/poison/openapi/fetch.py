"""Writes ``kube-apiserver.json`` beside this script: the OpenAPI v3 schemas of the kinds the scheduler
reads, as a freshly started dev control plane (etcd + kube-apiserver from ~/.cache/kopf-scheduler and the
CRDs, as the e2e tier starts it) serves them, trimmed by ``openapi_schema.trim``. Run it after moving to
another Kubernetes version or changing the CRD: ``.venv/bin/python tests/poison/openapi/fetch.py``;
tests/e2e/test_poison_objects.py fails while the committed file differs from what the API server serves."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openapi_schema import SCHEMA_FILE, dumps, served, trim

from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import default_crds_dir
from kopf_scheduler.devcluster.harness import ClusterHarness


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="openapi-fetch-") as state:
        cluster = DevCluster(Path(state), crds_dir=default_crds_dir(), die_with_parent=True)
        try:
            cluster.up()
            harness = ClusterHarness.of(cluster)
            version = harness.get("/version")["gitVersion"]
            documents = served(harness.get)
        finally:
            cluster.down()
    SCHEMA_FILE.write_text(dumps(trim(documents, version)))
    print(f"{SCHEMA_FILE}: {version}")


if __name__ == "__main__":
    main()
