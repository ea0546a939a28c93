"""The gang cases of ``test_operator_gangs.py``, written once and run by either scheduler: scheduler-plugins'
kube-scheduler with its Coscheduling plugin (``hack/controlplane/build-scheduler-plugins.sh``) or
kopf-scheduler with a SchedulingProfile enabling its Coscheduling, each on a fresh cluster of its own
(etcd + kube-apiserver with the PodGroup CRD from ``crds/``). Every case gets a scheduler started for it
with its Coscheduling arguments (kube-scheduler requires one queue sort, with the same arguments, for all
profiles, and Coscheduling is the queue sort), its own namespace ``gang-<case>`` and nodes
``<case>-<what>-<i>`` selected by its pods, the same names on both clusters; the scheduler is stopped and
the case's pods, PodGroups and nodes deleted after it.

A case returns an `Outcome`: the pods bound at each of its checkpoints (reached on a condition with a
deadline; a checkpoint that must show that nothing gets bound first waits for the scheduler's positive
signal, then watches for a moment) and every pod's FailedScheduling messages, to be compared across the
two schedulers.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from operator_harness import OperatorProcess, Operators, wait_profile, wait_until

from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.binaries import REQUIRED, BinariesNotFound, built_tool, find_bin_dir
from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.devcluster.nodes import node_body

#: ``$KOPF_SCHEDULER_PLUGINS_BIN_DIR``, else the pointer file build-scheduler-plugins.sh writes
PLUGINS_BIN_DIR_ENV = "KOPF_SCHEDULER_PLUGINS_BIN_DIR"
PLUGINS_BINARY = "kube-scheduler"
SCHEDULER = "gang-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
CASE_LABEL = "e2e.kopf-scheduler.dev/gang-case"
READY = "e2e.kopf-scheduler.dev/gang-ready"
PROFILES = "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles"
#: scheduler-plugins' manifests/coscheduling/scheduler-config.yaml: its one argument
BASE_ARGS: dict[str, int] = {"permitWaitingTimeSeconds": 10}


# -- the binaries ------------------------------------------------------------------------------------------


def scheduler_plugins_binary(env: Mapping[str, str] | None = None) -> Path:
    """scheduler-plugins' kube-scheduler, as build-scheduler-plugins.sh left it."""
    env = os.environ if env is None else env
    if env.get(PLUGINS_BIN_DIR_ENV):
        binary = Path(env[PLUGINS_BIN_DIR_ENV]) / PLUGINS_BINARY
        if not os.access(binary, os.X_OK):
            raise BinariesNotFound(f"{binary} missing; run `make controlplane`")
        return binary
    return built_tool("scheduler-plugins", PLUGINS_BINARY, env)


def bin_dir_with_scheduler(directory: Path, scheduler: Path) -> Path:
    """A bin dir of links for `DevCluster`: the control plane's binaries, but ``scheduler`` as its
    kube-scheduler, so that ``start_kube_scheduler`` runs it (config file, ports, readiness, stopping)."""
    directory.mkdir(parents=True, exist_ok=True)
    control_plane = find_bin_dir()
    for name in REQUIRED:
        (directory / name).symlink_to(scheduler if name == "kube-scheduler" else control_plane / name)
    return directory


# -- the two schedulers -------------------------------------------------------------------------------------


class GangScheduler(Protocol):
    """Runs a profile serving ``SCHEDULER`` with Coscheduling and the given arguments, for one case."""

    def start(self, case: str, args: Mapping[str, int]) -> None: ...

    def stop(self) -> None: ...

    def problems(self) -> list[str]: ...

    def log_tail(self, lines: int = 150) -> str: ...


def coscheduling_profile(args: Mapping[str, int]) -> dict[str, Any]:
    """The profile of scheduler-plugins' manifests/coscheduling/scheduler-config.yaml, serving
    ``SCHEDULER``; the same fields make kopf-scheduler's SchedulingProfile spec."""
    return {
        "schedulerName": SCHEDULER,
        "plugins": {
            "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
            "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
        },
        "pluginConfig": [{"name": "Coscheduling", "args": {**BASE_ARGS, **args}}],
    }


class SchedulerPlugins:
    """scheduler-plugins' kube-scheduler, started anew for each case."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster

    def start(self, case: str, args: Mapping[str, int]) -> None:
        self.cluster.start_kube_scheduler(config={"profiles": [coscheduling_profile(args)]})

    def stop(self) -> None:
        self.cluster.stop_kube_scheduler()

    def problems(self) -> list[str]:
        return []

    def log_tail(self, lines: int = 150) -> str:
        return self.cluster.log_tail("kube-scheduler", lines)


class KopfScheduler:
    """``kopf-scheduler run`` with a SchedulingProfile, both started anew for each case."""

    def __init__(self, cp: ClusterHarness, workdir: Path) -> None:
        self.cp = cp
        self.operators = Operators(cp.kubeconfig, workdir)
        self.operator: OperatorProcess | None = None
        #: the operator of the case that ran last (its log, once stopped)
        self.last: OperatorProcess | None = None
        self.profile = ""
        self.seen_problems: list[str] = []

    def start(self, case: str, args: Mapping[str, int]) -> None:
        self.operator = self.operators.start(f"op-{case}", lease_namespace=namespace_of(case))
        self.operator.wait_leading()
        self.profile = f"gang-{case}"
        body = {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": self.profile},
            "spec": coscheduling_profile(args),
        }
        self.cp.post(PROFILES, body)
        wait_profile(self.cp, self.profile, "True")

    def stop(self) -> None:
        if self.profile:
            self.cp.delete(f"{PROFILES}/{self.profile}")
            self.profile = ""
        operator, self.operator = self.operator, None
        if operator is not None:
            self.last = operator
            if operator.terminate() is None:
                self.seen_problems.append(f"operator {operator.name} still running 15 s after SIGTERM")
            self.seen_problems += operator.problems()

    def problems(self) -> list[str]:
        """ERROR lines and tracebacks in the logs of the operators stopped so far, and failed stops."""
        return list(self.seen_problems)

    def log_tail(self, lines: int = 150) -> str:
        operator = self.operator or self.last
        return operator.tail(lines) if operator is not None else ""


# -- a case's objects --------------------------------------------------------------------------------------


def namespace_of(case: str) -> str:
    return f"gang-{case}"


@dataclass
class Outcome:
    """What one scheduler did with one case."""

    #: checkpoint -> the pods bound then (sorted), or whatever the case records there
    checkpoints: dict[str, Any] = field(default_factory=dict)
    #: pod -> its FailedScheduling messages (each once, in order of first appearance)
    messages: dict[str, list[str]] = field(default_factory=dict)
    #: facts that may differ between the schedulers without either being wrong (which gang won, ...)
    notes: dict[str, Any] = field(default_factory=dict)
    #: the case could not reach a checkpoint: its traceback and the scheduler's log tail
    error: str = ""


@dataclass
class Case:
    cp: ClusterHarness
    name: str
    outcome: Outcome = field(default_factory=Outcome)
    #: the barrier pods `watch` created (and deleted)
    barriers: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return namespace_of(self.name)

    @property
    def label(self) -> dict[str, str]:
        return {CASE_LABEL: self.name}

    def create_namespace(self) -> None:
        resp = self.cp.api.request("GET", f"/api/v1/namespaces/{self.namespace}")
        if resp.status == 404:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
            self.cp.post("/api/v1/namespaces", body)

    def nodes(self, count: int, what: str = "node", cpu: str = "3") -> list[str]:
        resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
        template = {
            "metadata": {"labels": dict(self.label)},
            "status": {"capacity": resources, "allocatable": resources},
        }
        names = []
        for index in range(count):
            body = node_body(index, prefix=f"{self.name}-{what}-", template=template)
            names.append(self.cp.post("/api/v1/nodes", body)["metadata"]["name"])
        return names

    def label_nodes(self, nodes: list[str], labels: dict[str, str]) -> None:
        for node in nodes:
            resp = self.cp.api.request(
                "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}},
                content_type="application/merge-patch+json",
            )  # fmt: skip
            assert resp.status == 200, resp.text()

    def pod_group(self, name: str, min_member: int, **spec: Any) -> None:
        body = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"minMember": min_member, **spec},
        }
        self.cp.post(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{self.namespace}/podgroups", body)

    def pod(
        self, name: str, group: str = "", cpu: str = "1", selector: Mapping[str, str] | None = None
    ) -> None:
        """A pod of ``SCHEDULER`` on this case's nodes (or ``selector``'s), a member of ``group``."""
        body = pod_manifest(
            name,
            self.namespace,
            requests={"cpu": cpu, "memory": "100Mi"},
            schedulerName=SCHEDULER,
            nodeSelector=dict(selector if selector is not None else self.label),
        )
        if group:
            body["metadata"]["labels"] = {GROUP_LABEL: group}
        self.cp.post(f"/api/v1/namespaces/{self.namespace}/pods", body)

    def delete_pod(self, name: str) -> None:
        self.cp.request(
            "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}", {"gracePeriodSeconds": 0},
            expect=(200,),
        )  # fmt: skip

    def bound(self) -> list[str]:
        path = f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%21%3D"
        return sorted(p["metadata"]["name"] for p in self.cp.get(path)["items"])

    def unbound(self) -> list[str]:
        path = f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%3D"
        return sorted(p["metadata"]["name"] for p in self.cp.get(path)["items"])

    def failed_scheduling(self) -> dict[str, list[str]]:
        """pod -> its FailedScheduling messages, oldest first, each once."""
        items = self.cp.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        events = sorted(
            (e for e in items if e.get("reason") == "FailedScheduling"),
            key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or "",
        )
        messages: dict[str, list[str]] = {}
        for e in events:
            seen = messages.setdefault(e["involvedObject"]["name"], [])
            if e["message"] not in seen:
                seen.append(e["message"])
        return messages

    def wait_message(self, pod: str, pattern: str, timeout: float = 20.0) -> str:
        """Until a FailedScheduling message of ``pod`` matches ``pattern`` (a regular expression)."""
        found = wait_until(
            lambda: [m for m in self.failed_scheduling().get(pod, []) if re.search(pattern, m)],
            timeout,
            f"a FailedScheduling event of {self.namespace}/{pod} matching {pattern!r}",
        )
        return found[-1]

    def settle(self, want: list[str], timeout: float) -> list[str]:
        """The pods bound once exactly ``want`` are, or at the deadline (the checkpoint then shows what
        was bound instead)."""
        deadline = time.monotonic() + timeout
        while (bound := self.bound()) != sorted(want) and time.monotonic() < deadline:
            time.sleep(0.1)
        return bound

    def watch(self) -> list[str]:
        """Every pod seen bound until a barrier pod, created now, has been bound by the same scheduler
        (it belongs to no group and asks for no cpu, so nothing holds it back): the scheduler had its
        chance to bind the others first. The barrier is then deleted and not listed."""
        barrier = f"barrier-{len(self.barriers)}"
        self.barriers.append(barrier)
        body = pod_manifest(
            barrier, self.namespace, requests={"memory": "1Mi"}, schedulerName=SCHEDULER,
            nodeSelector=dict(self.label),
        )  # fmt: skip
        self.cp.post(f"/api/v1/namespaces/{self.namespace}/pods", body)
        seen: set[str] = set()

        def barrier_bound() -> bool:
            seen.update(self.bound())
            return barrier in seen

        wait_until(barrier_bound, 60, f"barrier pod {self.namespace}/{barrier} bound")
        self.delete_pod(barrier)
        wait_until(lambda: barrier not in self.bound(), 20, f"barrier pod {barrier} deleted")
        return sorted(seen - set(self.barriers))

    def cleanup(self) -> None:
        ns = self.namespace
        self.cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}, expect=(200,))
        self.cp.request(
            "DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", expect=(200,)
        )
        self.cp.request("DELETE", f"/api/v1/nodes?labelSelector={CASE_LABEL}%3D{self.name}", expect=(200,))


# -- the cases (as in test_operator_gangs.py) ---------------------------------------------------------------

WORKERS = [f"worker-{i}" for i in range(4)]
REJECTED = r"PodGroup \S+/{group} gets rejected due to Pod {pod} is unschedulable even after PostFilter"
#: How long a checkpoint waits for a gang to be bound once there is room for it. scheduler-plugins may
#: leave every member in the unschedulable pool under Coscheduling (rejected at Permit: a member that
#: reached Permit after its gang's rejection began is rejected again by a sibling's Unreserve); no node or
#: assigned-pod-deletion event moves those (Coscheduling registers none), so they wait for kube-scheduler's
#: leftover flush (podMaxInUnschedulablePodsDuration 5 min, checked every 30 s): up to 330 s, plus margin.
EVENTUALLY = 360.0


def gang_bound_at_once(case: Case) -> None:
    """A gang that fits is bound only once every member is placed: the fourth member fits nowhere until
    the nodes are labelled, and nothing is bound until then (a reject percentage of 50 keeps the one that
    fits nowhere from rejecting members waiting at Permit)."""
    nodes = case.nodes(2, cpu="2")
    case.pod_group("train", 4)
    for name in WORKERS[:3]:
        case.pod(name, "train")
    case.outcome.checkpoints["three of four created"] = case.watch()
    case.pod(WORKERS[3], "train", selector={**case.label, READY: "yes"})
    case.wait_message(WORKERS[3], "didn't match Pod's node affinity/selector")
    case.outcome.checkpoints["the fourth fits nowhere"] = case.watch()
    case.label_nodes(nodes, {READY: "yes"})
    case.outcome.checkpoints["the nodes labelled for it"] = case.settle(WORKERS, 40)


def three_of_four_fit(case: Case) -> None:
    """Room for three of a gang of four: none is bound; a node added, all four are (kopf-scheduler at
    once; scheduler-plugins may take until its leftover flush, see ``EVENTUALLY``)."""
    case.nodes(1, cpu="3")
    case.pod_group("train", 4)
    for name in WORKERS:
        case.pod(name, "train")
    rejected = REJECTED.format(group="train", pod=r"worker-\d")
    wait_until(
        lambda: [p for p, ms in case.failed_scheduling().items() for m in ms if re.search(rejected, m)],
        20,
        "the gang rejected by its member that fits nowhere",
    )
    case.outcome.checkpoints["room for three"] = case.watch()
    case.nodes(1, "extra", cpu="2")
    added = time.monotonic()
    case.outcome.checkpoints["a node added"] = case.settle(WORKERS, EVENTUALLY)
    case.outcome.notes["seconds from the node's addition until all four were bound"] = round(
        time.monotonic() - added
    )


def min_resources_too_large(case: Case) -> None:
    """minResources the cluster cannot hold: refused at PreFilter with the resource gap, nothing bound."""
    case.nodes(1, cpu="4")
    case.pod_group("huge", 2, minResources={"cpu": "100000"})
    for name in WORKERS[:2]:
        case.pod(name, "huge")
    wait_until(
        lambda: [m for ms in case.failed_scheduling().values() for m in ms if "resource gap" in m],
        20,
        "a member refused for the resource gap",
    )
    case.outcome.checkpoints["refused"] = case.watch()


def _three_wait_at_permit(case: Case) -> None:
    """The member that fits nowhere first, then the three that fit: the last of those is tried with all
    four in existence, passes the quorum check, waits at Permit and activates its siblings (in
    scheduler-plugins, members tried before the quorum are parked, and a pod's creation does not move
    them). Returns once the one that fits nowhere was tried after the three (sorted before it): they are
    waiting at Permit then, holding the node."""
    case.pod(WORKERS[3], "train", selector={**case.label, READY: "never"})
    for name in WORKERS[:3]:
        case.pod(name, "train")
    case.wait_message(WORKERS[3], "didn't match Pod's node affinity/selector")


def timed_out_gang(case: Case) -> None:
    """The three members that fit wait at Permit holding the node until their gang's timeout (8 s) passes;
    then another pod is bound there, none of the gang."""
    case.nodes(1, cpu="3")
    case.pod_group("train", 4, scheduleTimeoutSeconds=8)
    _three_wait_at_permit(case)
    case.pod("other", cpu="3")
    case.wait_message("other", "Insufficient cpu")
    case.outcome.checkpoints["while the gang waits"] = case.bound()
    timed_out = "rejected due to timeout after waiting 8s at plugin Coscheduling"
    wait_until(
        lambda: [p for p, ms in case.failed_scheduling().items() for m in ms if timed_out in m],
        30,
        "a member's wait timed out",
    )
    case.outcome.checkpoints["after the timeout"] = case.settle(["other"], 30)


def gangs_compete(case: Case) -> None:
    """Two gangs of four, room for six pods: one is bound whole, the other none; never half of each.
    (Which one wins is each scheduler's own: noted, not compared.)"""
    case.nodes(2, cpu="3")
    gangs = {gang: [f"{gang}-{i}" for i in range(4)] for gang in ("blue", "green")}
    for gang in gangs:
        case.pod_group(gang, 4)
    for blue, green in zip(gangs["blue"], gangs["green"], strict=True):  # interleaved, as they arrive
        case.pod(blue, "blue")
        case.pod(green, "green")

    samples: list[dict[str, int]] = []

    def sample() -> dict[str, int]:
        bound = set(case.bound())
        counts = {gang: len(bound & set(members)) for gang, members in gangs.items()}
        samples.append(counts)
        return counts

    settled = wait_until(lambda: c if 4 in (c := sample()).values() else None, 40, "a gang bound", 0.05)
    winner = next(gang for gang, n in settled.items() if n == 4)
    loser = next(gang for gang in gangs if gang != winner)
    rejected = REJECTED.format(group=loser, pod=rf"{loser}-\d")

    def loser_rejected() -> list[str]:
        sample()
        messages = case.failed_scheduling()
        return [m for pod in gangs[loser] for m in messages.get(pod, []) if re.search(rejected, m)]

    wait_until(loser_rejected, 30, f"gang {loser} rejected")
    seen = set(case.watch())  # settled: also once the scheduler has taken a later pod
    samples.append({gang: len(seen & set(members)) for gang, members in gangs.items()})
    sample()
    after = samples[samples.index(settled) :]
    case.outcome.notes["winner"] = winner
    case.outcome.checkpoints["samples with both gangs bound"] = [s for s in samples if all(s.values())]
    case.outcome.checkpoints["once settled: (winner, loser) bound"] = sorted(
        {f"({s[winner]}, {s[loser]})" for s in after}
    )


def member_deleted_while_waiting(case: Case) -> None:
    """A member deleted while its siblings wait at Permit (a reject percentage of 100 and a 300 s timeout
    keep them waiting): they are released, and another pod takes the room they held."""
    case.nodes(1, cpu="3")
    case.pod_group("train", 4, scheduleTimeoutSeconds=300)
    _three_wait_at_permit(case)
    case.pod("other", cpu="3")
    case.wait_message("other", "Insufficient cpu")
    case.outcome.checkpoints["while the gang waits"] = case.bound()
    case.delete_pod(WORKERS[0])
    for name in WORKERS[1:3]:
        case.wait_message(name, "rejection in Unreserve")
    case.outcome.checkpoints["a member deleted: bound"] = case.settle(["other"], 30)
    case.outcome.checkpoints["a member deleted: unbound"] = case.unbound()


@dataclass(frozen=True)
class CaseSpec:
    run: Callable[[Case], None]
    #: Coscheduling arguments beyond ``BASE_ARGS``
    args: Mapping[str, int] = field(default_factory=dict)


CASES: dict[str, CaseSpec] = {
    "at-once": CaseSpec(gang_bound_at_once, {"podGroupRejectPercentage": 50}),
    "three-of-four": CaseSpec(three_of_four_fit),
    "min-resources": CaseSpec(min_resources_too_large),
    "timeout": CaseSpec(timed_out_gang, {"podGroupRejectPercentage": 100}),
    "competing": CaseSpec(gangs_compete),
    "member-deleted": CaseSpec(member_deleted_while_waiting, {"podGroupRejectPercentage": 100}),
}


def run_cases(cp: ClusterHarness, scheduler: GangScheduler) -> Iterator[tuple[str, Outcome]]:
    """Each case in turn with a scheduler started for it; a case that fails records why and the next
    one still runs."""
    for name, spec in CASES.items():
        case = Case(cp, name)
        case.create_namespace()
        try:
            scheduler.start(name, spec.args)
            try:
                spec.run(case)
            finally:
                case.outcome.messages = case.failed_scheduling()
                scheduler.stop()
        except Exception:
            case.outcome.error = f"{traceback.format_exc()}\nscheduler log:\n{scheduler.log_tail()}"
        finally:
            case.cleanup()
        yield name, case.outcome
