"""GenericWorkload's metrics as kube-scheduler v1.37.2 registers and records them (``metrics.go``,
``schedule_one_podgroup.go``, ``framework/preemption``): registered only with the gate on (and the binding
conditions' only with DRADeviceBindingConditions on), each family with upstream's type, help text, labels
and buckets; and what a gang's attempts record: the pod group attempt and its algorithm, pod group
preemption (its attempt, evaluation, victims, disrupted groups, PDB violations, execution), and the
evaluation and execution of a single pod's preemption.

The real scheduler, queue, cache and default profile on a virtual clock; the API server is the fake.
"""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI
from workload_gangs import pod_group_object, run_active

from kopf_scheduler.api.feature_gates import BINARY_VERSION, FeatureGates
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget
from kopf_scheduler.framework.objects import WORKLOAD_POD_GROUPS
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

NS = "ml"

#: name -> (type, help, labels, ExponentialBuckets(start, factor, count)); kube-scheduler v1.37.2 with
#: GenericWorkload on
GENERIC_WORKLOAD: dict[str, tuple[str, str, tuple[str, ...], tuple[float, float, int] | None]] = {
    "scheduler_podgroup_schedule_attempts_total": (
        "counter",
        "[ALPHA] Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group "
        "could not be scheduled, while 'error' means an internal scheduler problem.",
        ("result", "profile"),
        None,
    ),
    "scheduler_podgroup_scheduling_attempt_duration_seconds": (
        "histogram",
        "[ALPHA] Pod group scheduling attempt latency in seconds",
        ("result", "profile"),
        (0.001, 2, 15),
    ),
    "scheduler_podgroup_scheduling_algorithm_duration_seconds": (
        "histogram",
        "[ALPHA] Pod group scheduling algorithm latency in seconds",
        (),
        (0.001, 2, 15),
    ),
    "scheduler_workload_preemption_attempts_total": (
        "counter",
        "[ALPHA] Total preemption attempts initiated by workload (including pod groups) in the cluster till "
        "now.",
        ("result",),
        None,
    ),
    "scheduler_workload_preemption_victims": (
        "histogram",
        "[ALPHA] Number of pod preemption victims caused by workload preemption.",
        (),
        (1, 2, 11),
    ),
    "scheduler_preemption_workload_disruptions": (
        "histogram",
        "[ALPHA] Number of workload preemption units being preempted. A single preemption unit can be all "
        "pods in a pod group (in case of DisruptionMode=all), or a single pod (in case of "
        "DisruptionMode=single).",
        ("preemptor",),
        (1, 2, 11),
    ),
    "scheduler_preemption_evaluation_duration_seconds": (
        "histogram",
        "[ALPHA] Duration in seconds for identifying the target preemption victims.",
        ("preemptor", "result"),
        (0.001, 2, 16),
    ),
    "scheduler_preemption_execution_duration_seconds": (
        "histogram",
        "[ALPHA] Duration in seconds for preempting the target preemption victims. With async preemption "
        "enabled, preemption execution does not block the scheduling of other pods.",
        ("preemptor", "result"),
        (0.001, 2, 16),
    ),
    "scheduler_preemption_pdb_violations_total": (
        "counter",
        "[ALPHA] Total number of pod disruption budget violations caused by preemption.",
        ("preemptor",),
        None,
    ),
}
BINDING_CONDITIONS = (
    "scheduler_dra_bindingconditions_allocations_total",
    "scheduler_dra_bindingconditions_wait_duration_seconds",
)
EXTENDED_RESOURCE_CLAIMS = "dynamic_resource_allocation_resourceclaim_creates_total"


def _scheduler(**gates: bool) -> tuple[Scheduler, FakeAPI, SchedulerMetrics]:
    client = FakeAPI()
    scheduler = Scheduler(client, clock=VirtualClock())
    resolved = FeatureGates.resolve(BINARY_VERSION, {"GenericWorkload": True, **gates})
    scheduler.feature_gates = resolved
    scheduler.defaults = default_plugins(resolved)
    scheduler.use_pod_groups(resolved.enabled("GenericWorkload"))
    scheduler.set_profile(ProfileSpec(scheduler_name="default-scheduler"))
    for name in ("n1", "n2"):
        scheduler.add_node(make_node().name(name).capacity(cpu="2", memory="8Gi", pods="110").obj())
    metrics = SchedulerMetrics()
    metrics.attach(scheduler)
    metrics.register_gated(resolved.enabled)  # as the service does once the gates are resolved
    return scheduler, client, metrics


def _pod_group(scheduler: Scheduler, name: str, min_count: int, priority: int, whole: bool = False) -> None:
    scheduler.update_object(WORKLOAD_POD_GROUPS, pod_group_object(name, NS, min_count, priority, whole))


def _member(name: str, group: str, cpu: str, priority: int, node: str = "") -> dict[str, Any]:
    pod = make_pod().name(name).namespace(NS).uid(name).req(cpu=cpu).priority(priority).label("app", group)
    if node:
        pod = pod.node(node)
    return pod.set("spec.schedulingGroup", {"podGroupName": group}).obj()


def _value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _families(metrics: SchedulerMetrics) -> dict[str, tuple[str, str, list[str], list[float]]]:
    families = {}
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = sorted({key for sample in family.samples for key in sample.labels if key != "le"})
        bounds = [float(sample.labels["le"]) for sample in family.samples if sample.name.endswith("_bucket")]
        families[name] = (family.type, family.documentation, labels, sorted(set(bounds)))
    return families


def _low_gang_bound(scheduler: Scheduler, whole: bool, disruptions_allowed: int | None = None) -> None:
    """The gang ``low`` of priority 0, one pod of 1500m bound on each node; with ``disruptions_allowed``, a
    PodDisruptionBudget ``keep-low`` over its pods allowing that many disruptions."""
    _pod_group(scheduler, "low", min_count=2, priority=0, whole=whole)
    for i, node in enumerate(("n1", "n2")):
        scheduler.add_pod(_member(f"low-{i}", "low", "1500m", priority=0, node=node))
    if disruptions_allowed is None:
        return
    scheduler.disruption_budgets.set(
        DisruptionBudget.parse(
            {
                "metadata": {"namespace": NS, "name": "keep-low"},
                "spec": {"selector": {"matchLabels": {"app": "low"}}},
                "status": {"disruptionsAllowed": disruptions_allowed},
            }
        )
    )


async def _gang_preempts_a_lower_gang(scheduler: Scheduler) -> None:
    """The gang ``urgent`` of priority 100, two pods of 1500m: with ``low``'s pods bound on both nodes it
    fits only where they are."""
    _pod_group(scheduler, "urgent", min_count=2, priority=100)
    for i in range(2):
        scheduler.add_pod(_member(f"urgent-{i}", "urgent", "1500m", priority=100))
    await run_active(scheduler)


async def test_with_the_gate_on_every_family_is_upstreams() -> None:
    scheduler, _, metrics = _scheduler()
    _low_gang_bound(scheduler, whole=False, disruptions_allowed=0)
    await _gang_preempts_a_lower_gang(scheduler)
    # a single pod's preemption: urgent's pods hold both nodes' room (nominated), so "solo" preempts
    scheduler.add_pod(make_pod().name("solo").namespace(NS).uid("solo").req(cpu="100m").priority(200).obj())
    await run_active(scheduler)
    families = _families(metrics)
    for name, (kind, help_text, labels, buckets) in GENERIC_WORKLOAD.items():
        bounds: list[float] = []
        if buckets is not None:
            start, factor, count = buckets
            bounds = [start * factor**i for i in range(count)] + [float("inf")]
        assert families.get(name) == (kind, help_text, sorted(labels), bounds), name


def test_families_are_registered_only_with_their_gate_on() -> None:
    _, _, off = _scheduler(GenericWorkload=False, DRADeviceBindingConditions=False)
    families = _families(off)
    assert not set(GENERIC_WORKLOAD) & set(families)
    assert not set(BINDING_CONDITIONS) & set(families)
    assert EXTENDED_RESOURCE_CLAIMS in families  # DRAExtendedResource: GA, locked on in 1.37
    _, _, on = _scheduler()
    families = _families(on)
    assert set(GENERIC_WORKLOAD) <= set(families)
    assert set(BINDING_CONDITIONS) <= set(families)  # DRADeviceBindingConditions is on by default in 1.37


def test_at_an_emulated_version_whose_gates_are_off_their_families_are_not_registered() -> None:
    """At 1.35 DRAExtendedResource and DRADeviceBindingConditions were alpha, off by default."""
    metrics = SchedulerMetrics()
    metrics.register_gated(FeatureGates.resolve((1, 35), {}).enabled)
    families = _families(metrics)
    assert EXTENDED_RESOURCE_CLAIMS not in families
    assert not set(BINDING_CONDITIONS) & set(families)
    metrics = SchedulerMetrics()
    metrics.register_gated(FeatureGates.resolve((1, 35), {"DRAExtendedResource": True}).enabled)
    assert EXTENDED_RESOURCE_CLAIMS in _families(metrics)


async def test_a_gang_that_fits_counts_one_scheduled_attempt() -> None:
    scheduler, _, metrics = _scheduler()
    _pod_group(scheduler, "fits", min_count=3, priority=0)
    for i in range(3):
        scheduler.add_pod(_member(f"fits-{i}", "fits", "500m", priority=0))
    await run_active(scheduler)
    labels = {"profile": "default-scheduler", "result": "scheduled"}
    assert _value(metrics, "scheduler_podgroup_schedule_attempts_total", **labels) == 1
    assert _value(metrics, "scheduler_podgroup_scheduling_attempt_duration_seconds_count", **labels) == 1
    assert _value(metrics, "scheduler_podgroup_scheduling_algorithm_duration_seconds_count") == 1
    assert _value(metrics, "scheduler_workload_preemption_attempts_total", result="Success") is None
    # the pods' own attempts are counted as before
    assert _value(metrics, "scheduler_schedule_attempts_total", **labels) == 3


async def test_a_gang_with_no_victims_is_unschedulable_after_one_preemption_attempt() -> None:
    scheduler, _, metrics = _scheduler()
    _pod_group(scheduler, "big", min_count=3, priority=0)
    for i in range(3):
        scheduler.add_pod(_member(f"big-{i}", "big", "1500m", priority=0))
    await run_active(scheduler)
    labels = {"profile": "default-scheduler", "result": "unschedulable"}
    assert _value(metrics, "scheduler_podgroup_schedule_attempts_total", **labels) == 1
    unresolvable = "UnschedulableAndUnresolvable"
    assert _value(metrics, "scheduler_workload_preemption_attempts_total", result=unresolvable) == 1
    evaluation = {"preemptor": "podgroup", "result": unresolvable}
    assert _value(metrics, "scheduler_preemption_evaluation_duration_seconds_count", **evaluation) == 1
    assert _value(metrics, "scheduler_workload_preemption_victims_count") == 0
    assert _value(metrics, "scheduler_preemption_attempts_total") == 0  # the single-pod counter


async def test_a_gang_preempting_a_lower_gang_records_the_candidate_and_its_execution() -> None:
    scheduler, api, metrics = _scheduler()
    _low_gang_bound(scheduler, whole=False, disruptions_allowed=1)
    await _gang_preempts_a_lower_gang(scheduler)
    assert sorted(api.evicted) == ["ml/low-0", "ml/low-1"]
    attempt = {"profile": "default-scheduler", "result": "waiting_on_preemption"}
    assert _value(metrics, "scheduler_podgroup_schedule_attempts_total", **attempt) == 1
    assert _value(metrics, "scheduler_workload_preemption_attempts_total", result="Success") == 1
    evaluation = {"preemptor": "podgroup", "result": "Success"}
    assert _value(metrics, "scheduler_preemption_evaluation_duration_seconds_count", **evaluation) == 1
    assert _value(metrics, "scheduler_workload_preemption_victims_count") == 1
    assert _value(metrics, "scheduler_workload_preemption_victims_sum") == 2
    # low's pods are each a unit of a PodGroup (disruptionMode single): two disruptions
    assert _value(metrics, "scheduler_preemption_workload_disruptions_sum", preemptor="podgroup") == 2
    # the budget allows one disruption: the second pod violates it
    assert _value(metrics, "scheduler_preemption_pdb_violations_total", preemptor="podgroup") == 1
    execution = {"preemptor": "podgroup", "result": "success"}
    assert _value(metrics, "scheduler_preemption_execution_duration_seconds_count", **execution) == 1
    assert _value(metrics, "scheduler_preemption_goroutines_execution_total", result="success") == 1
    # the single-pod preemption metrics stay as they were
    assert _value(metrics, "scheduler_preemption_victims_count") == 0


async def test_a_group_preempted_whole_is_one_disruption() -> None:
    scheduler, _, metrics = _scheduler()
    _low_gang_bound(scheduler, whole=True)
    await _gang_preempts_a_lower_gang(scheduler)
    assert _value(metrics, "scheduler_workload_preemption_victims_sum") == 2
    assert _value(metrics, "scheduler_preemption_workload_disruptions_count", preemptor="podgroup") == 1
    assert _value(metrics, "scheduler_preemption_workload_disruptions_sum", preemptor="podgroup") == 1
    assert _value(metrics, "scheduler_preemption_pdb_violations_total", preemptor="podgroup") is None


async def test_a_single_pods_preemption_is_timed_as_a_pods() -> None:
    scheduler, api, metrics = _scheduler()
    scheduler.add_pod(make_pod().name("low").namespace(NS).uid("low").req(cpu="1500m").node("n1").obj())
    scheduler.add_pod(make_pod().name("low2").namespace(NS).uid("low2").req(cpu="1500m").node("n2").obj())
    scheduler.add_pod(make_pod().name("high").namespace(NS).uid("high").req(cpu="1500m").priority(100).obj())
    await run_active(scheduler)
    assert len(api.evicted) == 1
    evaluation = {"preemptor": "pod", "result": "Success"}
    assert _value(metrics, "scheduler_preemption_evaluation_duration_seconds_count", **evaluation) == 1
    execution = {"preemptor": "pod", "result": "success"}
    assert _value(metrics, "scheduler_preemption_execution_duration_seconds_count", **execution) == 1
    assert _value(metrics, "scheduler_preemption_attempts_total") == 1
    assert _value(metrics, "scheduler_workload_preemption_attempts_total", result="Success") is None
    assert _value(metrics, "scheduler_workload_preemption_victims_count") == 0
