"""Shadow mode beside kube-scheduler: ``kopf-scheduler run --shadow`` watching the pods of the upstream
kube-scheduler's profile while kube-scheduler binds them (a schedulerName of this test's own, so that no
other test's pod is judged).

Five nodes, each preferred (node affinity, weight 100) by one fifth of 400 pods: kube-scheduler's choice
for each of those is the one best node, whatever the other pods' load (their requests are too small to
move a resource score, and a 32-CPU ballast pod on the first node weighs less than the preference). The
other 100 pods prefer nothing. Under the built-in profile, which decides as kube-scheduler does, the shadow
judges every one of the 500 (its metric counts 500 verdicts, none infeasible) and says "same" for every
pod whose best node was unique (no difference logged for any of the 400).

Every other node holds a 1m-CPU pod from the start. Without it a pod that prefers nothing could be judged
"different" by chance: kube-scheduler binds asynchronously, so the shadow may see a binding before that of
a pod kube-scheduler had already assumed; if the earlier pod was the first on its node, the node looks
empty to the shadow, and an empty node scores one point less for such a pod (NodeResourcesBalancedAllocation
74 against 75), so the node kube-scheduler picked among equals would not be among the shadow's best. With a
pod on every node from the start, the nodes without ballast tie for such a pod whatever the order the
shadow sees bindings in.

Then a SchedulingProfile for that schedulerName that would bin-pack (MostAllocated, node affinity not
scored) takes over the shadow, live: for 200 more pods, those kube-scheduler sends to their preferred node
are reported "different" (the profile would pick the ballasted node), those preferring that node "same".

Throughout, the shadow writes nothing to the API server: the audit log holds no create, update, patch or
delete by its identity.
"""

from __future__ import annotations

import re
import urllib.request
from datetime import UTC, datetime

import pytest
from operator_harness import Operators, Scope, admin_kubeconfig, settled_audit, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

SHADOW_USER = "dev-user-c"
PREFERENCE = "e2e-shadow-preference"
CLASSES = 5
COUNT = 500
SECOND = 240  # 200 of them prefer a node
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _pod(scope: Scope, scheduler_name: str, prefix: str, i: int) -> dict:
    """Pod ``i``: of preference class ``i % 6`` (class 5 prefers nothing)."""
    klass = i % (CLASSES + 1)
    spec: dict = {}
    if klass < CLASSES:
        term = {"matchExpressions": [{"key": PREFERENCE, "operator": "In", "values": [str(klass)]}]}
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
            }
        }
    pod = scope.pod(f"{prefix}{i:03d}", scheduler_name, requests={"cpu": "1m", "memory": "1Mi"}, **spec)
    pod["metadata"].setdefault("labels", {})["class"] = str(klass)
    return pod


def _class(pod: dict) -> int:
    return int(pod["metadata"]["labels"]["class"])


def _decisions(port: int, profile: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    sample = f'kopf_scheduler_shadow_decisions_total{{profile="{profile}",result="'
    found = re.findall(rf'^{re.escape(sample)}(\w+)"\}} (\S+)$', text, re.M)
    return {result: float(value) for result, value in found}


def test_shadow_beside_kube_scheduler_agrees_on_every_unique_best_and_writes_nothing(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    cp = control_plane
    upstream = scope.name("upstream")  # kube-scheduler's profile here, and what the shadow watches
    nodes = [
        scope.nodes(1, f"pref-{k}", labels={PREFERENCE: str(k)}, cpu="64", memory="256Gi", pods="250")[0]
        for k in range(CLASSES)
    ]
    ballast = scope.pod("ballast", requests={"cpu": "32", "memory": "1Gi"})
    ballast["spec"]["nodeName"] = nodes[0]
    cp.post(f"/api/v1/namespaces/{scope.namespace}/pods", ballast)
    for k, node in enumerate(nodes[1:], 1):  # no node empty: see the module's docstring
        settler = scope.pod(f"settler-{k}", requests={"cpu": "1m", "memory": "1Mi"})
        settler["spec"]["nodeName"] = node
        cp.post(f"/api/v1/namespaces/{scope.namespace}/pods", settler)
    started = datetime.now(UTC)  # the dev user may have written for an earlier test of the session
    shadow = operators.start(
        "op-shadow",
        lease_namespace=scope.namespace,
        leader_elect=False,
        ports=True,
        kubeconfig=admin_kubeconfig(cp, scope, SHADOW_USER),
        args=["--shadow", "--default-scheduler-name", upstream],
    )
    shadow.wait_for_log("scheduling starts")
    cp.cluster.start_kube_scheduler(config={"profiles": [{"schedulerName": upstream}]})
    try:
        scope.create_pods([_pod(scope, upstream, "p", i) for i in range(COUNT)])
        scope.wait_all_bound(timeout=180)
        decisions = wait_until(
            lambda: (d := _decisions(shadow.metrics_port, upstream)) and sum(d.values()) >= COUNT and d,
            60,
            "a verdict on every pod",
        )
        assert decisions == {"same": COUNT}, decisions

        packing = scope.name("packing")
        scope.create_profile(
            packing,
            {
                "schedulerName": upstream,
                "shadow": True,
                "plugins": {"score": {"disabled": [{"name": "NodeAffinity"}]}},
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
                ],
            },
        )
        wait_until(lambda: shadow.log().count(f"serving schedulerName {upstream!r}") >= 2, 30, "the switch")
        more = [_pod(scope, upstream, "q", i) for i in range(SECOND) if i % (CLASSES + 1) < CLASSES]
        scope.create_pods(more)
        scope.wait_all_bound(timeout=180)
    finally:
        cp.cluster.stop_kube_scheduler()
    total = COUNT + len(more)
    decisions = wait_until(
        lambda: (d := _decisions(shadow.metrics_port, upstream)) and sum(d.values()) >= total and d,
        60,
        "verdicts",
    )
    elsewhere = {p["metadata"]["name"] for p in more if _class(p) != 0}
    assert decisions == {"same": total - len(elsewhere), "different": len(elsewhere)}, decisions
    differing = dict(
        re.findall(
            rf"{scope.namespace}/(\S+) bound to \S+ by another scheduler; it would pick (\S+) ", shadow.log()
        )
    )
    assert differing == dict.fromkeys(elsewhere, nodes[0])

    writes = [
        (r.verb, r.resource, r.namespace, r.name)
        for r in settled_audit(cp, scope.namespace)
        if r.user == SHADOW_USER and r.verb in WRITES and r.received >= started
    ]
    assert writes == [], writes[:10]
    assert shadow.alive, shadow.tail()
