"""VolumeBindingArgs (``types_pluginargs.go`` upstream), checked as ``ValidateVolumeBindingArgs`` checks
them with kube-scheduler's default feature gates.

``shape`` belongs to volume-capacity scoring, which the ``StorageCapacityScoring`` gate (alpha, off by
default in v1.34) turns on; with the gate off kube-scheduler refuses the field, and so does this plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.args import ArgsError

DEFAULT_BIND_TIMEOUT_SECONDS = 600
#: a day (upstream only refuses negative values; it multiplies the value into a time.Duration, which
#: overflows past 292 years): pre-bind holds the pod's binding that long at most
MAX_BIND_TIMEOUT_SECONDS = 24 * 60 * 60


@dataclass
class Args:
    #: how long pre-bind waits for the PV controller to bind the pod's claims; 0: it does not wait
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    #: utilization -> score points of volume-capacity scoring (``StorageCapacityScoring``, off)
    shape: list[Any] | None = None

    def validate(self) -> None:
        if self.bind_timeout_seconds < 0:
            raise ArgsError(
                "bindTimeoutSeconds",
                f"{self.bind_timeout_seconds}: invalid BindTimeoutSeconds, should not be a negative value",
            )
        if self.bind_timeout_seconds > MAX_BIND_TIMEOUT_SECONDS:
            raise ArgsError(
                "bindTimeoutSeconds",
                f"{self.bind_timeout_seconds}: must be at most {MAX_BIND_TIMEOUT_SECONDS} (a day)",
            )
        if self.shape is not None:
            raise ArgsError(
                "shape",
                "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring",
            )
