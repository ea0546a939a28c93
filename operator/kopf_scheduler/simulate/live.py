"""Reading a live cluster for the offline tools: every kind the scheduler reads, as (where, object)
pairs the loader (``loader.load_objects``) takes like the documents of files. Read-only: lists only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.api.schema import GROUP, PLURAL, VERSION
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.slim import slim
from kopf_scheduler.k8s import ConfigError, ConnectionInfo, KubeClient, RestClient, load_connection
from kopf_scheduler.simulate.loader import ClusterInput, load_objects, load_profiles

#: how the API server's logs tell the offline tools' requests from the operator's
USER_AGENT = "kopf-scheduler-offline"

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


def connect_live(kubeconfig: Path | None, context: str | None = None) -> ConnectionInfo:
    """The connection ``k8s.load_connection`` resolves (``kubeconfig``, else $KUBECONFIG, else in-cluster,
    else ~/.kube/config; ``context``: a kubeconfig context other than the current one); a configuration
    that cannot be used is one ``UsageError`` line."""
    try:
        return load_connection(kubeconfig, context=context)
    except ConfigError as e:
        raise UsageError(f"cannot connect: {e}") from None


def read_live(connection: ConnectionInfo) -> list[tuple[str, dict[str, Any]]]:
    """``read_cluster`` of the cluster of ``connection``; a cluster that cannot be reached or read is one
    ``UsageError`` line."""

    async def read() -> list[tuple[str, dict[str, Any]]]:
        async with KubeClient(RestClient(connection, user_agent=USER_AGENT)) as client:
            return await read_cluster(client)

    try:
        return asyncio.run(read())
    except Exception as e:  # the API server's refusal or no answer: one line, not a traceback
        raise UsageError(f"cannot read the cluster at {connection.server}: {e}") from None


def load_live(
    kubeconfig: Path | None, profile_files: list[Path], dump: Path | None, context: str | None = None
) -> tuple[ClusterInput, list[tuple[str, ProfileSpec]], str]:
    """``simulate --from-cluster``: the cluster's objects through the loader, the profiles (the files
    given, else the cluster's SchedulingProfiles that it accepts), and where they came from; with
    ``dump``, what was read is written there first as YAML that ``simulate --cluster`` reads."""
    connection = connect_live(kubeconfig, context)
    objects, server = read_live(connection), connection.server
    kept = [(where, dict(slim(obj))) for where, obj in objects if obj.get("kind") != "SchedulingProfile"]
    manifests = [dict(slim(obj)) for _, obj in objects if obj.get("kind") == "SchedulingProfile"]
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / "cluster.yaml").write_text(yaml.safe_dump_all([obj for _, obj in kept], sort_keys=False))
        (dump / "profiles.yaml").write_text(yaml.safe_dump_all(manifests, sort_keys=False))
    if profile_files:
        profiles = load_profiles(profile_files)
    else:
        profiles = []
        for obj in manifests:
            try:
                profiles.append((f"SchedulingProfile {obj['metadata']['name']}", parse_profile(obj)))
            except ProfileError:
                continue  # refused in the cluster too: it serves nothing
    return load_objects(kept), profiles, server
