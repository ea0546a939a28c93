"""Fault tier: the leader goes away in the middle of a burst while a standby runs. Two instances under
two identities (dev users, each granted cluster-admin for the test) so that the API server's audit log
says which instance sent each request. Cases: the leader stopped with SIGTERM (it exits 0 after its
bindings in flight); the leader's network black-holed (every new request it sends is dropped, through
the fault proxy) until the standby leads, then healed: a leader that had not stopped writing when its
renewals failed would now bind pods the new leader is binding.

Invariants, from the audit log and the Lease:
- every pod of the burst is bound by exactly one successful binding request;
- no binding, pod DELETE or pod status write by the old leader's identity was received at or after the
  new holder's ``acquireTime``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from operator_harness import (
    LEASE_DURATION,
    OperatorProcess,
    Operators,
    Scope,
    admin_kubeconfig,
    holder,
    kubeconfig_token,
    lease,
    settled_audit,
    wait_until,
)

from kopf_scheduler.devcluster.audit import AuditRecord
from kopf_scheduler.devcluster.fault_proxy import Fault, FaultProxy
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.k8s.timestamps import parse

pytestmark = pytest.mark.e2e

COUNT = 300
OLD, NEW = "dev-user-a", "dev-user-b"
POD_WRITES = ("create", "update", "patch", "delete")


def _burst_with_failover(
    cp: ClusterHarness,
    scope: Scope,
    operators: Operators,
    leader_kubeconfig: Path,
    standby_kubeconfig: Path,
    break_leader: Callable[[OperatorProcess], Callable[[], None] | None],
) -> list[AuditRecord]:
    """``break_leader`` breaks the leader once it has bound some pods, and may return how to undo it
    (called once the standby holds the Lease: a partition that heals)."""
    ns = scope.namespace
    scope.nodes(4)  # 440 pod slots
    leader = operators.start("op-old", lease_namespace=ns, kubeconfig=leader_kubeconfig)
    leader.wait_leading()
    standby = operators.start("op-new", lease_namespace=ns, kubeconfig=standby_kubeconfig)
    standby.wait_for_log("is held by 'op-old'")
    bodies = [scope.pod(f"burst-{i:03d}", requests={"cpu": "10m", "memory": "10Mi"}) for i in range(COUNT)]
    creating = threading.Thread(target=scope.create_pods, args=(bodies, 4))
    creating.start()
    try:
        wait_until(lambda: len(scope.bound()) >= 30, 60, "30 pods bound by the leader")
        heal = break_leader(leader)
    finally:
        creating.join()
    wait_until(lambda: holder(cp, ns) == "op-new", LEASE_DURATION * 4 + 20, "the standby holding the Lease")
    if heal is not None:
        heal()
    scope.wait_all_bound(timeout=120)

    records = settled_audit(cp, ns)
    bindings = Counter(r.name for r in records if r.is_binding and r.namespace == ns and r.succeeded)
    assert bindings == Counter({body["metadata"]["name"]: 1 for body in bodies})
    acquired = parse(lease(cp, ns)["spec"]["acquireTime"])
    late = [
        (r.verb, r.subresource, r.name, r.received.isoformat())
        for r in records
        if r.user == OLD
        and r.namespace == ns
        and r.resource == "pods"
        and r.verb in POD_WRITES
        and r.received.timestamp() >= acquired
    ]
    assert late == [], f"writes by the old leader after the new one acquired the Lease: {late}"
    assert any(r.user == OLD and r.is_binding for r in records), "the old leader bound some pods"
    assert any(r.user == NEW and r.is_binding for r in records), "the new leader bound the rest"
    return records


def test_sigterm_to_the_leader_in_a_burst(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    old, new = admin_kubeconfig(control_plane, scope, OLD), admin_kubeconfig(control_plane, scope, NEW)

    def stop(leader: OperatorProcess) -> None:
        assert leader.terminate() == 0, leader.tail()

    _burst_with_failover(control_plane, scope, operators, old, new, stop)


def test_the_leader_black_holed_in_a_burst(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    old, new = admin_kubeconfig(control_plane, scope, OLD), admin_kubeconfig(control_plane, scope, NEW)
    with FaultProxy.of(control_plane.cluster) as proxy:
        through_proxy = proxy.kubeconfig(tmp_path / "kubeconfig-old", token=kubeconfig_token(old))

        def black_hole(leader: OperatorProcess) -> Callable[[], None]:
            proxy.add(Fault("*", r".*", "blackhole", seconds=LEASE_DURATION * 3, times=None))
            return proxy.clear  # the partition heals once the standby leads

        _burst_with_failover(control_plane, scope, operators, through_proxy, new, black_hole)
