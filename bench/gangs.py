"""The gang-scheduling workload (``SchedulingGangs``): PodGroups of scheduler-plugins' API
(``scheduling.x-k8s.io/v1alpha1``, the CRD in ``crds/`` that every bench cluster has) and their pods,
scheduled by kopf-scheduler's ``kopf-scheduler-gang`` profile (``profiles/gang-scheduling.yaml``, applied as
a SchedulingProfile during setup, before the scheduler starts).

There is no upstream scheduler_perf counterpart: kube-scheduler has no gang scheduling (Coscheduling lives
out of tree, in scheduler-plugins), so it would place pods one by one and leave partial gangs; the raw
binder does no scheduling at all. Only kopf-scheduler runs it.

Shape: gangs of ``GANG_SIZE`` pods (``minMember`` = ``GANG_SIZE``), each pod 1500m CPU, so a node (4 CPU,
one initial 100m pod) holds two members and the nodes hold half of the gangs. The measured phase ends once
``expected_bound`` pods are bound: every gang that fits, whole. Beside it:

- ``GangSampler`` (the companion) reads the bound measured pods from the API server every second (a
  metadata-only LIST: labels are all it needs) and counts per gang the members bound. A gang with some but
  not all members bound is *partial*; binding a permitted gang takes one POST per member, so a gang may be
  seen partial while its bindings are in flight. One still partial ``PARTIAL_GRACE`` seconds after it was
  first seen so, or at the last sample, is *stuck*: a run with any is not complete.
- ``check``: after the measured phase, every gang is bound whole or not at all, ``expected_bound / GANG_SIZE``
  of them whole, and the profile was accepted.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from bench.apimetrics import Key
from bench.objects import Companion, Extras, Setup
from kopf_scheduler.devcluster import ApiClient

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_SCHEDULER = "kopf-scheduler-gang"
GANG_SIZE = 8
#: a node holds two members (4 CPU less the initial 100m pod): the cluster holds half of the gangs
MEMBER_CPU = "1500m"
MEMBERS_PER_NODE = 2
PROFILE_FILE = Path(__file__).resolve().parents[1] / "profiles" / "gang-scheduling.yaml"
PROFILES = "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
#: how long a gang may be seen partly bound (its bindings in flight) before it counts as stuck
PARTIAL_GRACE = 5.0
SAMPLE_INTERVAL = 1.0
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def gang_of(pod_name: str) -> str:
    """``pod-<i>`` belongs to ``gang-<i // GANG_SIZE>``."""
    return f"gang-{int(pod_name.rsplit('-', 1)[1]) // GANG_SIZE}"


def expected_bound(nodes: int, measured: int) -> int:
    """Members bound once every gang that fits is whole."""
    return min(measured, (nodes * MEMBERS_PER_NODE // GANG_SIZE) * GANG_SIZE)


def pod_group(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": GANG_SIZE},
    }


def bound_by_gang(pods: list[dict[str, Any]]) -> Counter[str]:
    """Bound members per gang, from pods (or their metadata) already filtered to bound ones."""
    counts: Counter[str] = Counter()
    for pod in pods:
        gang = ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)
        if gang:
            counts[gang] += 1
    return counts


class GangScheduling(Extras):
    """The gang profile and one PodGroup per gang of the measured pods."""

    async def before_pods(self, setup: Setup) -> None:
        loader = setup.loader
        profile = yaml.safe_load(PROFILE_FILE.read_text())
        assert profile["spec"]["schedulerName"] == GANG_SCHEDULER, PROFILE_FILE
        await loader.create(PROFILES, profile)
        path = PODGROUPS.format(namespace=setup.measured_namespace)
        gangs = sorted({gang_of(p) for p in setup.measured_pods}, key=lambda g: int(g.split("-")[1]))
        await loader.each(gangs, lambda g: loader.create(path, pod_group(g, setup.measured_namespace)))

    def __init__(self) -> None:
        self.sampler: GangSampler | None = None

    def companion(self, api: ApiClient, setup: Setup) -> Companion | None:
        self.sampler = GangSampler(api, setup.measured_namespace)
        return self.sampler

    async def check(self, setup: Setup) -> list[str]:
        loader, problems = setup.loader, []
        ns = setup.measured_namespace
        profile = await loader.request(
            "GET", f"{PROFILES}/{yaml.safe_load(PROFILE_FILE.read_text())['metadata']['name']}"
        )
        accepted = [
            c for c in (profile.get("status") or {}).get("conditions") or [] if c.get("type") == "Accepted"
        ]
        if not accepted or accepted[0].get("status") != "True":
            problems.append(f"profile not accepted: {accepted}")
        pods = await loader.request("GET", f"/api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName%21%3D")
        counts = bound_by_gang(pods["items"])
        partial = sorted(g for g, n in counts.items() if n != GANG_SIZE)
        if partial:
            problems.append(
                f"{len(partial)} gangs partly bound: " + ", ".join(f"{g}={counts[g]}" for g in partial[:5])
            )
        whole = sum(1 for n in counts.values() if n == GANG_SIZE)
        want = expected_bound(len(setup.nodes), len(setup.measured_pods)) // GANG_SIZE
        if whole != want:
            problems.append(f"{whole} gangs bound whole, expected {want}")
        if self.sampler is not None and self.sampler.stuck:
            stuck = sorted(self.sampler.stuck)
            problems.append(f"{len(stuck)} gangs seen partly bound for over {PARTIAL_GRACE:g} s: {stuck[:5]}")
        return problems


class GangSampler(Companion):
    """Samples the bound members of every gang once a second, in its own thread (see the module
    docstring); its LIST requests are the harness's."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self._requests: Counter[Key] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="gang-sampler", daemon=True)
        self.samples = 0
        self.errors: list[str] = []
        #: most gangs seen partly bound at one sample
        self.partial_max = 0
        #: samples that saw any gang partly bound
        self.samples_with_partial = 0
        #: gang -> when it was first seen partly bound (cleared once whole)
        self._partial_since: dict[str, float] = {}
        self.longest_partial = 0.0
        self.stuck: set[str] = set()
        self.whole = 0
        self._first_bind: float | None = None
        self._last_whole_change: float | None = None

    @property
    def requests(self) -> Counter[Key]:
        return self._requests

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=30)
        self._sample(final=True)

    def summary(self) -> dict[str, Any]:
        span = None
        if self._first_bind is not None and self._last_whole_change is not None:
            span = round(self._last_whole_change - self._first_bind, 1)
        return {
            "gang_size": GANG_SIZE,
            "gangs_whole": self.whole,
            "gang_samples": self.samples,
            "gang_samples_with_partial": self.samples_with_partial,
            "gangs_partial_max_per_sample": self.partial_max,
            "gang_longest_partial_seconds": round(self.longest_partial, 2),
            "gangs_stuck_partial": len(self.stuck),
            "gang_last_whole_after_first_bind_seconds": span,
            "gang_sampler_errors": self.errors[:3],
        }

    def _main(self) -> None:
        started = time.monotonic()
        k = 0
        while not self._stop.is_set():
            self._sample(final=False)
            k += 1
            self._stop.wait(max(0.0, started + k * SAMPLE_INTERVAL - time.monotonic()))

    def _list_bound(self) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%21%3D"
        headers = {**self.api.headers(), "Accept": METADATA_LIST}
        req = urllib.request.Request(self.api.server + path, headers=headers)
        with urllib.request.urlopen(req, timeout=30, context=self.api.ssl_context()) as resp:
            self._requests[("LIST", "", "pods", "")] += 1
            return list(json.loads(resp.read()).get("items") or [])

    def _sample(self, *, final: bool) -> None:
        try:
            counts = bound_by_gang(self._list_bound())
        except (OSError, ValueError) as e:
            self.errors.append(f"{type(e).__name__}: {e}")
            return
        now = time.monotonic()
        self.samples += 1
        if counts and self._first_bind is None:
            self._first_bind = now
        whole = sum(1 for n in counts.values() if n >= GANG_SIZE)
        if whole != self.whole:
            self.whole, self._last_whole_change = whole, now
        partial = {g for g, n in counts.items() if n < GANG_SIZE}
        if partial:
            self.samples_with_partial += 1
            self.partial_max = max(self.partial_max, len(partial))
        for gang in list(self._partial_since):
            if gang not in partial:
                del self._partial_since[gang]
        for gang in partial:
            since = self._partial_since.setdefault(gang, now)
            self.longest_partial = max(self.longest_partial, now - since)
            if final or now - since > PARTIAL_GRACE:
                self.stuck.add(gang)
