"""InterPodAffinityArgs (``types_pluginargs.go`` upstream) and their validation
(``ValidateInterPodAffinityArgs`` in ``apis/config/validation/validation_pluginargs.go``)."""

from __future__ import annotations

from dataclasses import dataclass

from kopf_scheduler.framework.args import ArgsError

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100


@dataclass
class Args:
    #: the score an existing pod's required affinity term adds when the incoming pod matches it
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    #: skip scoring altogether for pods without preferred (anti-)affinity terms of their own
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self) -> None:
        weight = self.hard_pod_affinity_weight
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise ArgsError(
                "hardPodAffinityWeight",
                f"Invalid value: {weight}: not in valid range "
                f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
            )
