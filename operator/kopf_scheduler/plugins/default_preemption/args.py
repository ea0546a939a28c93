"""DefaultPreemptionArgs: how many candidate nodes the dry run looks for (``types_pluginargs.go`` upstream,
checked as ``ValidateDefaultPreemptionArgs`` checks them)."""

from __future__ import annotations

from dataclasses import dataclass

from kopf_scheduler.framework.args import ArgsError

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
#: both fields are int32 upstream: a larger value does not decode
INT32_MAX = 2**31 - 1


@dataclass
class Args:
    #: candidates wanted, as a percentage of the nodes preemption may help
    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    #: ... but at least this many (never more than there are such nodes)
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    def validate(self) -> None:
        percentage, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= percentage <= 100:
            raise ArgsError("minCandidateNodesPercentage", f"{percentage}: not in valid range [0, 100]")
        if absolute < 0:
            raise ArgsError("minCandidateNodesAbsolute", f"{absolute}: not in valid range [0, inf)")
        if absolute > INT32_MAX:
            raise ArgsError("minCandidateNodesAbsolute", f"{absolute}: not in valid range [0, {INT32_MAX}]")
        if percentage == 0 and absolute == 0:
            raise ArgsError(
                "minCandidateNodesPercentage",
                "0: cannot be zero at the same time as minCandidateNodesAbsolute",
            )

    def num_candidates(self, num_nodes: int) -> int:
        """``max(num_nodes * percentage / 100, absolute)``, at most ``num_nodes``
        (``calculateNumCandidates``)."""
        share = num_nodes * self.min_candidate_nodes_percentage // 100
        return min(max(share, self.min_candidate_nodes_absolute), num_nodes)
