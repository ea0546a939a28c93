"""Reading a live cluster for the offline tools: every kind the scheduler reads, as (where, object)
pairs the loader (``loader.load_objects``) takes like the documents of files. Read-only: lists only."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.api.schema import GROUP, PLURAL, VERSION
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.k8s import KubeClient

#: what is listed besides the watched kinds: (collection path, required)
_CORE = (
    ("/api/v1/nodes", True),
    ("/api/v1/pods", True),
    ("/apis/policy/v1/poddisruptionbudgets", True),
    ("/apis/scheduling.k8s.io/v1/priorityclasses", True),
)
PROFILES_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


async def read_cluster(client: KubeClient) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the kinds the scheduler reads, and the SchedulingProfiles; a kind the API server
    does not serve (a CRD not applied, an API group turned off) is read as none."""
    paths = [*_CORE, *((kind.list_path, False) for kind in WATCHED_KINDS), (PROFILES_PATH, False)]
    objects: list[tuple[str, dict[str, Any]]] = []
    for path, required in paths:
        try:
            items = await client.list_objects(path)
        except APIError as e:
            if e.status == 404 and not required:
                continue
            raise
        objects.extend((f"{client.connection.server}{path}", item) for item in items)
    return objects
