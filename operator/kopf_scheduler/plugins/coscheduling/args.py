"""CoschedulingArgs (scheduler-plugins ``apis/config``): defaults as ``SetDefaults_CoschedulingArgs``, checks
as ``ValidateCoschedulingArgs``, and upper bounds it lacks (the reasons are beside them)."""

from __future__ import annotations

from dataclasses import dataclass

from kopf_scheduler.framework.args import ArgsError

DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE = 10
#: upstream only refuses negative values; a Permit wait is cut to 15 minutes by the framework (upstream's
#: ``maxTimeout``), so a longer one would not mean what it says
MAX_PERMIT_WAITING_TIME_SECONDS = 15 * 60
#: a day: far beyond any useful backoff (upstream multiplies it into a time.Duration, which overflows
#: past 292 years)
MAX_POD_GROUP_BACKOFF_SECONDS = 24 * 60 * 60


@dataclass
class Args:
    #: how long members wait at Permit for the rest of their gang, unless the PodGroup's
    #: ``scheduleTimeoutSeconds`` says otherwise; also how long a gang that passed the minResources
    #: check skips it (0: 60 s for the wait)
    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS
    #: after a gang is rejected as a whole, its pods are refused at PreFilter this long (0: not at all)
    pod_group_backoff_seconds: int = DEFAULT_POD_GROUP_BACKOFF_SECONDS
    #: PostFilter rejects the gang only when more than this percentage of minMember is unplaced
    pod_group_reject_percentage: int = DEFAULT_POD_GROUP_REJECT_PERCENTAGE

    def validate(self) -> None:
        if self.permit_waiting_time_seconds < 0:
            raise ArgsError(
                "permitWaitingTimeSeconds", f"{self.permit_waiting_time_seconds}: must be greater than 0"
            )
        if self.permit_waiting_time_seconds > MAX_PERMIT_WAITING_TIME_SECONDS:
            raise ArgsError(
                "permitWaitingTimeSeconds",
                f"{self.permit_waiting_time_seconds}: must be at most {MAX_PERMIT_WAITING_TIME_SECONDS} "
                "(a Permit wait is cut to 15 minutes)",
            )
        if self.pod_group_backoff_seconds < 0:
            raise ArgsError(
                "podGroupBackoffSeconds", f"{self.pod_group_backoff_seconds}: must be greater than 0"
            )
        if self.pod_group_backoff_seconds > MAX_POD_GROUP_BACKOFF_SECONDS:
            raise ArgsError(
                "podGroupBackoffSeconds",
                f"{self.pod_group_backoff_seconds}: must be at most {MAX_POD_GROUP_BACKOFF_SECONDS} (a day)",
            )
        if not 0 <= self.pod_group_reject_percentage <= 100:
            raise ArgsError(
                "podGroupRejectPercentage", f"{self.pod_group_reject_percentage}: must be between 0 and 100"
            )
