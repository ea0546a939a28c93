"""DynamicResources: kube-scheduler's default profile has it (DRA is GA and on in v1.34); so does ours,
so that pods and messages come out the same.

Resource claims themselves (``spec.resourceClaims``) are not allocated by this scheduler: a pod that
references claims is rejected as unresolvable with a message saying so. For every other pod the plugin
does what upstream's does for a pod without claims: pre-filter records that the pod has none and skips
filtering; post-filter answers ``no new claims to deallocate`` (which kube-scheduler joins into every
FailedScheduling message before the preemption part), and, when an earlier pre-filter rejected the pod
before this one ran, fails reading its state with ``not found``, as upstream does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.interface import (
    FilterPlugin,
    NodeStatusMap,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins import names

NAME = names.DYNAMIC_RESOURCES
NO_NEW_CLAIMS = "no new claims to deallocate"
#: the text of upstream's CycleState lookup error when a plugin's state was never written
STATE_NOT_FOUND = "not found"
CLAIMS_NOT_SUPPORTED = (
    "pod references resource claims; dynamic resource allocation is not supported by this scheduler"
)


@dataclass(frozen=True, slots=True)
class _State:
    claims: tuple[str, ...]

    def clone(self) -> _State:
        return self


_KEY: StateKey[_State] = StateKey(NAME)


def _claims(pod: PodInfo) -> tuple[str, ...]:
    return tuple(str(c.get("name") or "") for c in pod.spec.get("resourceClaims") or ())


class DynamicResources(PreFilterPlugin, FilterPlugin, PostFilterPlugin):
    name = NAME

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        claims = _claims(pod)
        state.write(_KEY, _State(claims))
        if not claims:
            return None, SKIP
        return None, unresolvable(f"{CLAIMS_NOT_SUPPORTED}: [{' '.join(claims)}]")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        return None  # pods with claims never get here; the others skip this filter

    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        recorded = state.get(_KEY)
        if recorded is None:
            return None, error(STATE_NOT_FOUND)
        if not recorded.claims:
            return None, unschedulable(NO_NEW_CLAIMS)
        return None, unschedulable(CLAIMS_NOT_SUPPORTED)


def new(args: Args, handle: Any) -> DynamicResources:
    return DynamicResources()


__all__ = ["CLAIMS_NOT_SUPPORTED", "NAME", "NO_NEW_CLAIMS", "Args", "DynamicResources", "new"]
