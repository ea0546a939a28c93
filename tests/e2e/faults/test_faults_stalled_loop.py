"""Fault tier: a plugin stalls the scheduling loop for 12 s (three Lease durations here) in the middle of
a burst, with a standby running. The plugin is an out-of-tree one, installed as users install theirs
(an entry point in ``kopf_scheduler.plugins``, found on the operator's ``PYTHONPATH``), enabled by a
SchedulingProfile; its PreFilter sleeps once for the one pod that uses that profile.

Invariants, from the API server (the Lease as it was read every half second, the audit log, the pods):
- the Lease stays with the leader and is renewed all through the stall (its renewal runs on a thread of
  its own), so the standby never acquires it and never writes a pod;
- every pod of the burst, and the stalled one, is bound by exactly one successful binding request;
- no node holds more than its allocatable CPU or pod count; both instances are still running.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from operator_harness import (
    Operators,
    Scope,
    admin_kubeconfig,
    lease,
    over_allocatable,
    settled_audit,
    wait_profile,
    wait_until,
)

from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.k8s.timestamps import parse

pytestmark = pytest.mark.e2e

COUNT = 200
STALL_SECONDS = 12.0
OLD, NEW = "dev-user-a", "dev-user-b"
PLUGIN = "E2EStallLoop"
PLUGIN_SOURCE = f'''
"""Sleeps in PreFilter, once per pod, holding the scheduling loop."""

import logging
import time
from dataclasses import dataclass

from kopf_scheduler.framework.interface import PreFilterPlugin

NAME = "{PLUGIN}"
log = logging.getLogger("kopf_scheduler.e2e_stall")


@dataclass
class Args:
    def validate(self) -> None:
        pass


class StallLoop(PreFilterPlugin):
    name = NAME

    def __init__(self) -> None:
        self.stalled: set[str] = set()

    def pre_filter(self, state, pod, nodes):
        if pod.name not in self.stalled:
            self.stalled.add(pod.name)
            log.warning("stall begins for %s", pod.name)
            time.sleep({STALL_SECONDS})
            log.warning("stall ends for %s", pod.name)
        return None, None


def new(args, handle):
    return StallLoop()
'''


def install_plugin(directory: Path) -> dict[str, str]:
    """The plugin as a distribution on ``directory`` (module plus dist-info with its entry point); returns
    the environment that puts it on the operator's path."""
    (directory / "e2e_stall_loop.py").write_text(PLUGIN_SOURCE)
    info = directory / "e2e_stall_loop-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: e2e-stall-loop\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[kopf_scheduler.plugins]\n{PLUGIN} = e2e_stall_loop\n")
    return {"PYTHONPATH": str(directory)}


def _logged_at(log: str, message: str) -> float:
    """The time of the log line with ``message`` (Kopf's format: ``[2026-11-27 03:15:01,306] ...``)."""
    match = re.search(rf"^\[([^\]]+)\] .*{re.escape(message)}", log, re.MULTILINE)
    assert match, message
    return (
        time.mktime(time.strptime(match[1].split(",")[0], "%Y-%m-%d %H:%M:%S"))
        + int(match[1].split(",")[1]) / 1000
    )


def test_a_plugin_stalling_the_loop_in_a_burst(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    cp, ns = control_plane, scope.namespace
    env = install_plugin(tmp_path)
    scope.nodes(4)  # 440 pod slots, 16 CPUs
    leader = operators.start(
        "op-old", lease_namespace=ns, kubeconfig=admin_kubeconfig(cp, scope, OLD), env=env
    )
    leader.wait_leading()
    standby = operators.start(
        "op-new", lease_namespace=ns, kubeconfig=admin_kubeconfig(cp, scope, NEW), env=env
    )
    standby.wait_for_log("is held by 'op-old'")
    stalling = scope.name("stalling")
    scope.create_profile(
        stalling, {"schedulerName": stalling, "plugins": {"preFilter": {"enabled": [{"name": PLUGIN}]}}}
    )
    wait_profile(cp, stalling, "True")
    transitions = lease(cp, ns)["spec"].get("leaseTransitions", 0)

    bodies = [scope.pod(f"burst-{i:03d}", requests={"cpu": "10m", "memory": "10Mi"}) for i in range(COUNT)]
    creating = threading.Thread(target=scope.create_pods, args=(bodies, 4))
    creating.start()
    samples: list[tuple[str, float]] = []  # (holder, renewTime) read during the stall
    try:
        wait_until(lambda: len(scope.bound()) >= 30, 60, "30 pods bound by the leader")
        scope.create_pod("stalled", stalling)
        leader.wait_for_log("stall begins for stalled")
        while "stall ends for stalled" not in leader.log():
            spec = lease(cp, ns)["spec"]
            samples.append((spec["holderIdentity"], parse(spec["renewTime"])))
            time.sleep(0.5)
    finally:
        creating.join()
    scope.wait_all_bound(timeout=120)

    began, ended = (_logged_at(leader.log(), f"stall {what} for stalled") for what in ("begins", "ends"))
    assert ended - began >= STALL_SECONDS - 1, (began, ended)
    assert len(samples) >= 15, samples
    assert {holder for holder, _ in samples} == {"op-old"}, samples
    renewals = sorted({renewed for _, renewed in samples})
    assert len(renewals) >= STALL_SECONDS / 2, f"the Lease was not renewed through the stall: {renewals}"
    assert max(b - a for a, b in itertools.pairwise(renewals)) < 3.0, renewals
    final = lease(cp, ns)["spec"]
    assert (final["holderIdentity"], final.get("leaseTransitions", 0)) == ("op-old", transitions)

    records = settled_audit(cp, ns)
    names = [body["metadata"]["name"] for body in bodies] + ["stalled"]
    bindings = Counter(r.name for r in records if r.is_binding and r.namespace == ns and r.succeeded)
    assert bindings == Counter({name: 1 for name in names})
    new_writes = [
        (r.verb, r.name) for r in records if r.user == NEW and r.namespace == ns and r.resource == "pods"
    ]
    assert new_writes == [], "the standby wrote pods while the leader was stalled"
    assert over_allocatable(cp, scope) == {}
    assert leader.alive and standby.alive, leader.tail()
