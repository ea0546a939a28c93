"""NodeDeclaredFeatures: a pod that needs a node feature fits only on nodes that declare it in
``status.declaredFeatures`` (``nodedeclaredfeatures/nodedeclaredfeatures.go``, v1.37).

Pre-filter infers the features the pod requires (``features``); a pod that requires none, which is nearly
every pod, skips the filter. The filter rejects a node whose declared features lack one of them, as
``UnschedulableAndUnresolvable`` (preemption cannot add a feature to a node). With the
NodeDeclaredFeatures gate off (the default at 1.35) the plugin is built but does nothing, registers no
event, and kube-scheduler's default set leaves it out (``plugins/defaults.py``).

Requeueing: a node added, or one whose declared features changed, may fit (the hint skips an update that
left them alone); so may the pod's own update when it changes what the pod requires.

The plugin has no vectorised form: it filters only the few pods that require a feature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.node_declared_features.features import (
    COMPONENT_VERSION,
    DEFAULT_REGISTRY,
    FeatureRegistry,
    Version,
    declared_features,
)

NAME = names.NODE_DECLARED_FEATURES
#: the feature gate that turns the plugin on
GATE = "NodeDeclaredFeatures"
ERR_REASON_UNSATISFIED_REQUIREMENTS = "node(s) didn't match Pod's required features"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: frozenset[str]

    def clone(self) -> _PreFilterState:
        return self


_PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)


def _spec(pod: PodInfo) -> Mapping[str, Any]:
    spec = pod.raw.get("spec")
    return spec if isinstance(spec, Mapping) else {}


class NodeDeclaredFeatures(PreFilterPlugin, FilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The features the pod requires."""
        return [(signers.FEATURES, sorted(self.required(pod)))]

    def __init__(
        self,
        enabled: bool,
        registry: FeatureRegistry = DEFAULT_REGISTRY,
        version: Version = COMPONENT_VERSION,
    ) -> None:
        self.enabled = enabled
        self.registry = registry
        self.version = version

    def required(self, pod: PodInfo) -> frozenset[str]:
        return self.registry.infer_for_scheduling(_spec(pod), self.version)

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not self.enabled:
            return None, SKIP
        required = self.required(pod)
        if not required:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(required))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not self.enabled:
            return None
        found = state.get(_PRE_FILTER_KEY)
        if found is None:
            return error(f'error reading "{_PRE_FILTER_KEY.name}" from cycle-state: not found')
        if not found.required <= self.registry.try_map(declared_features(node.node)):
            return unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        return None

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        if not self.enabled:
            return []
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_DECLARED_FEATURE), _node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.update()), self._target_pod_updated
            ),
        ]

    def _target_pod_updated(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """Queue when the update changed the features the pod requires."""
        if not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP if self.required(old) == self.required(new) else QueueingHint.QUEUE


def _node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue for a new node, and for an update that changed the node's declared features."""
    if not isinstance(new, NodeInfo) or (old is not None and not isinstance(old, NodeInfo)):
        return QueueingHint.QUEUE
    if old is not None and declared_features(old.node) == declared_features(new.node):
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def new(args: NoArgs, handle: Handle) -> NodeDeclaredFeatures:
    return NodeDeclaredFeatures(handle.feature_gates.enabled(GATE))
