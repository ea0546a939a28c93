"""Topology spread constraints as the scheduler reads them (upstream's ``common.go``).

A pod's constraints of one kind (``DoNotSchedule`` for filtering, ``ScheduleAnyway`` for scoring) are
parsed into ``Constraint`` values: the label selector with the pod's values for ``matchLabelKeys`` ANDed
in, ``minDomains`` (1 when unset), and the node inclusion policies (``nodeAffinityPolicy`` Honor and
``nodeTaintsPolicy`` Ignore when unset). A pod without constraints gets the plugin's default constraints,
whose selector comes from the Services and controllers that select or own the pod.

Selector semantics kept from upstream: a missing ``labelSelector`` matches nothing (and ``matchLabelKeys``
cannot widen it); an empty one ``{}`` matches every pod's labels, but counting existing pods with it
yields 0 (``countPodsMatchSelector`` short-circuits on an empty selector, as at v1.37.2). Only pods in the
incoming pod's namespace that are not terminating are counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import LabelSelector, RequiredNodeAffinity, Requirement, SelectorError
from kopf_scheduler.framework.taints import NO_EXECUTE, NO_SCHEDULE, Toleration, first_untolerated
from kopf_scheduler.plugins.pod_topology_spread.args import DO_NOT_SCHEDULE, HONOR, IGNORE, SCHEDULE_ANYWAY

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})

#: upstream's ``systemDefaultConstraints``.
SYSTEM_DEFAULT_CONSTRAINTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

#: Looks up the selectors of the Services, ReplicationControllers, ReplicaSets and StatefulSets that select
#: or own ``pod`` and returns them ANDed into one selector (upstream's ``helper.DefaultSelector``); ``None``
#: or an empty selector when nothing selects the pod, in which case default constraints do not apply.
DefaultSelectorFn = Callable[[PodInfo], "LabelSelector | None"]


def no_default_selector(pod: PodInfo) -> LabelSelector | None:
    """The lookup used until Service and controller informers exist: nothing selects any pod."""
    return None


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    #: ``None``: no selector (matches nothing).
    selector: LabelSelector | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)

    @property
    def counts_nothing(self) -> bool:
        """Whether counting existing pods always yields 0 (no selector, or the empty one)."""
        return self.selector is None or not self.selector.requirements


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: Sequence[str], pod_labels: Mapping[str, str]
) -> LabelSelector | None:
    # The scheduler still merges at v1.37.2 even though the API server now does it at pod creation: an
    # already merged key=value requirement ANDed again changes nothing.
    pairs = [(k, pod_labels[k]) for k in keys if k in pod_labels]
    if not pairs or selector is None:
        return selector
    merged = tuple(Requirement(k, "In", frozenset({v})) for k, v in pairs)
    return LabelSelector(merged + selector.requirements)


def parse(
    raw: Iterable[Mapping[str, Any]], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    """The constraints in ``raw`` whose ``whenUnsatisfiable`` is ``action``
    (``filterTopologySpreadConstraints``).

    Raises ``SelectorError`` for a label selector that cannot be parsed.
    """
    out = []
    for c in raw:
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = LabelSelector.parse(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or ()
        if keys:
            selector = _merge_match_label_keys(selector, keys, pod_labels)
        min_domains = c.get("minDomains")
        out.append(
            Constraint(
                max_skew=int(c.get("maxSkew") or 0),
                topology_key=str(c.get("topologyKey") or ""),
                selector=selector,
                min_domains=1 if min_domains is None else int(min_domains),
                honor_affinity=(c.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_taints=(c.get("nodeTaintsPolicy") or IGNORE) == HONOR,
            )
        )
    return tuple(out)


_KINDS = {DO_NOT_SCHEDULE: "hard", SCHEDULE_ANYWAY: "soft"}


def own_constraints(pod: PodInfo, action: str) -> tuple[Constraint, ...]:
    """The pod's explicit constraints of ``action``, memoised on the pod; raises ``ValueError`` for a
    selector that cannot be parsed (each kind is parsed only when its extension point needs it)."""
    key = "PodTopologySpread." + action
    found = pod.extra.get(key)
    if found is None:
        try:
            found = pod.extra[key] = parse(pod.topology_spread_constraints, pod.labels, action)
        except SelectorError as e:
            raise ValueError(f"obtaining pod's {_KINDS[action]} topology spread constraints: {e}") from None
    return found  # type: ignore[no-any-return]


def default_constraints(
    parsed: tuple[Constraint, ...], selector_of: DefaultSelectorFn, pod: PodInfo
) -> tuple[Constraint, ...]:
    """``buildDefaultConstraints``: the plugin's default constraints of one kind (parsed once, without a
    selector) with the pod's deduced selector, or none when nothing selects the pod."""
    if not parsed:
        return ()
    selector = selector_of(pod)
    if selector is None or not selector.requirements:
        return ()
    return tuple(
        Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.honor_affinity, c.honor_taints)
        for c in parsed
    )


# -- per node --------------------------------------------------------------------------------------------
def count_matching(pods: Iterable[PodInfo], selector: LabelSelector | None, namespace: str) -> int:
    """``countPodsMatchSelector``: pods of ``namespace``, not terminating, matching ``selector``."""
    if selector is None or not selector.requirements:
        return 0
    count = 0
    for p in pods:
        if p.deletion_timestamp is not None or p.namespace != namespace:
            continue
        if selector.matches(p.labels):
            count += 1
    return count


def has_all_keys(labels: Mapping[str, str], constraints: Iterable[Constraint]) -> bool:
    """``nodeLabelsMatchSpreadConstraints``: the node has every constraint's topology key."""
    return all(c.topology_key in labels for c in constraints)


def tolerates_node(node: NodeInfo, tolerations: tuple[Toleration, ...]) -> bool:
    return not node.taints or first_untolerated(node.taints, tolerations, DO_NOT_SCHEDULE_EFFECTS) is None


def node_included(c: Constraint, pod: PodInfo, required: RequiredNodeAffinity, node: NodeInfo) -> bool:
    """``matchNodeInclusionPolicies``: whether the node's pods count for the constraint."""
    if c.honor_affinity and not required.matches(node.labels, node.name):
        return False
    return not c.honor_taints or tolerates_node(node, pod.tolerations)


def required_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    found = pod.extra.get("PodTopologySpread.affinity")
    if found is None:
        found = pod.extra["PodTopologySpread.affinity"] = RequiredNodeAffinity.of_pod_spec(pod.spec)
    return found  # type: ignore[no-any-return]
