"""VolumeBindingArgs (``types_pluginargs.go`` upstream), defaulted as ``SetDefaults_VolumeBindingArgs`` and
checked as ``ValidateVolumeBindingArgs`` at v1.37.

``shape`` belongs to volume-capacity scoring, which the ``StorageCapacityScoring`` gate turns on (alpha,
off, up to 1.36; beta, on, from 1.37). With the gate on, an unset or empty shape is upstream's default
(``DEFAULT_SHAPE``: the emptier a node's volumes, the better) and a given one is checked as upstream's
``validateFunctionShape`` checks it; with the gate off, any shape is refused, as upstream refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.args import (
    MAX_CUSTOM_PRIORITY_SCORE,
    ArgsError,
    ShapePoint,
    decode_shape,
    invalid,
    validate_shape,
)

STORAGE_CAPACITY_SCORING = "StorageCapacityScoring"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
#: a day (upstream only refuses negative values; it multiplies the value into a time.Duration, which
#: overflows past 292 years): pre-bind holds the pod's binding that long at most
MAX_BIND_TIMEOUT_SECONDS = 24 * 60 * 60
#: ``SetDefaults_VolumeBindingArgs`` with the gate on
DEFAULT_SHAPE = (ShapePoint(0, MAX_CUSTOM_PRIORITY_SCORE), ShapePoint(100, 0))


@dataclass
class Args:
    #: how long pre-bind waits for the PV controller to bind the pod's claims; 0: it does not wait
    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    #: utilization -> score points of volume-capacity scoring; None: not given
    shape: tuple[ShapePoint, ...] | None = None
    #: the ``StorageCapacityScoring`` gate is on (``set_defaults``): the plugin scores by ``shape``
    storage_capacity_scoring: bool = field(default=False, init=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        unknown = sorted(set(raw) - {"bindTimeoutSeconds", "shape"})
        if unknown:
            raise ArgsError(unknown[0], "unknown field; known: bindTimeoutSeconds, shape")
        args = cls()
        timeout = raw.get("bindTimeoutSeconds")
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int):
                raise ArgsError("bindTimeoutSeconds", f"must be an integer, not {timeout!r}")
            args.bind_timeout_seconds = timeout
        if raw.get("shape") is not None:
            args.shape = decode_shape(raw["shape"], "shape")
        return args

    def set_defaults(self, gates: FeatureGates) -> None:
        self.storage_capacity_scoring = gates.enabled(STORAGE_CAPACITY_SCORING)
        if self.storage_capacity_scoring and not self.shape:
            self.shape = DEFAULT_SHAPE

    def validate(self) -> None:
        if self.bind_timeout_seconds < 0:
            raise ArgsError(
                "bindTimeoutSeconds",
                invalid(
                    self.bind_timeout_seconds, "invalid BindTimeoutSeconds, should not be a negative value"
                ),
            )
        if self.bind_timeout_seconds > MAX_BIND_TIMEOUT_SECONDS:
            raise ArgsError(
                "bindTimeoutSeconds",
                f"{self.bind_timeout_seconds}: must be at most {MAX_BIND_TIMEOUT_SECONDS} (a day)",
            )
        if self.storage_capacity_scoring:
            validate_shape(self.shape or (), "shape")
        elif self.shape is not None:
            # upstream prints the internal points as JSON: [{"Utilization":1,"Score":1}]
            points = [{"Utilization": p.utilization, "Score": p.score} for p in self.shape]
            raise ArgsError(
                "shape",
                invalid(
                    points,
                    "unexpected field `shape`, remove it or turn on the feature gate "
                    + STORAGE_CAPACITY_SCORING,
                ),
            )
