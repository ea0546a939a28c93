"""Shadow profiles: judging the placements another scheduler makes, before switching to a profile.

A profile with ``spec.shadow: true`` (every profile under ``kopf-scheduler run --shadow``) never binds and
never writes: the pods of its ``schedulerName`` are not queued. When another scheduler binds one of them
(the watch shows the pod that was pending with us now on a node), the profile runs the pod's scheduling
cycle as it would have, against the cache just before that binding: filter and score every node, no
assume, no preemption. The verdict is ``same`` when the node chosen is among the nodes this profile
scores highest (it could have picked it too), ``different`` when it is not, ``infeasible`` when no node
passes this profile's filters. The scheduler counts verdicts (``kopf_scheduler_shadow_decisions_total``)
and logs each difference with the scores of both nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.diagnosis import FitError, fit_error_message
from kopf_scheduler.framework.eager import SuspendedError, run_eagerly
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.scheduling.context import CycleContext
from kopf_scheduler.scheduling.schedule_one import NoNodesAvailable, SchedulingError, schedule_pod

SAME, DIFFERENT, INFEASIBLE = "same", "different", "infeasible"


@dataclass(frozen=True)
class ShadowDecision:
    profile: str
    pod: PodInfo
    #: where the other scheduler bound it
    bound_node: str
    result: str
    #: the nodes this profile scores highest (several when they tie)
    best: tuple[str, ...] = ()
    #: total scores of the bound node and of the best ones (none when one node was feasible)
    scores: dict[str, int] = field(default_factory=dict)
    #: why no node fits (``infeasible``), as a FailedScheduling message says it
    message: str = ""

    def describe(self) -> str:
        """One line for the log."""
        where = f"{self.pod.key} bound to {self.bound_node} by another scheduler"
        if self.result == INFEASIBLE:
            return f"shadow profile {self.profile}: {where}; it would not place it: {self.message}"
        scores = ", ".join(
            f"{node} {score}" for node, score in sorted(self.scores.items(), key=lambda kv: -kv[1])
        )
        verdict = "agrees" if self.result == SAME else f"would pick {', '.join(self.best)}"
        return f"shadow profile {self.profile}: {where}; it {verdict}" + (
            f" (scores: {scores})" if scores else ""
        )


def judge(ctx: CycleContext, fwk: Framework, pending: PodInfo, bound_node: str) -> ShadowDecision | None:
    """The verdict of ``fwk`` on ``pending`` bound to ``bound_node``, from the cache as it is (the
    binding not in it yet); None when the cycle cannot be judged (a plugin failed; a profile with
    extenders, whose calls a shadow does not make)."""
    if fwk.extenders:
        return None
    ctx.cache.update_snapshot(ctx.snapshot)
    fwk.current_snapshot = ctx.snapshot
    try:
        result = run_eagerly(schedule_pod(ctx, fwk, CycleState(), pending))
    except FitError as e:
        return ShadowDecision(fwk.profile_name, pending, bound_node, INFEASIBLE, message=fit_error_message(e))
    except NoNodesAvailable as e:
        return ShadowDecision(fwk.profile_name, pending, bound_node, INFEASIBLE, message=str(e))
    except (SchedulingError, SuspendedError):
        return None
    if result.totals is None or result.rows is None:
        best: tuple[str, ...] = (result.host,)
        scores: dict[str, int] = {}
    else:
        infos = ctx.snapshot.node_infos
        names = [infos[int(row)].name for row in result.rows]
        top = result.totals.max()
        best = tuple(names[i] for i in np.flatnonzero(result.totals == top))
        scores = {
            n: int(t)
            for n, t in zip(names, result.totals.tolist(), strict=True)
            if n in best or n == bound_node
        }
    verdict = SAME if bound_node in best else DIFFERENT
    return ShadowDecision(fwk.profile_name, pending, bound_node, verdict, best, scores)
