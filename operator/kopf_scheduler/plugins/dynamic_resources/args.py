"""DynamicResourcesArgs (``types_pluginargs.go`` upstream), defaulted as ``SetDefaults_DynamicResourcesArgs``
defaults them and checked as v1.37's ``ValidateDynamicResourcesArgs`` checks them, with its messages:

- ``filterTimeout``: how long Filter may search one node for devices before the attempt ends in an error
  (``DRASchedulerFilterTimeout``, beta and on from v1.34 to v1.37.2; default 10s while it is on; 0 means
  no limit; refused while it is off);
- ``bindingTimeout``: how long PreBind may wait for the device binding conditions of the pod's claims
  (default 10m while ``DRADeviceBindingConditions`` and ``DRAResourceClaimDeviceStatus`` are both on, as
  from v1.36; at least 1s; refused while either is off).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.args import ArgsError, forbidden, invalid
from kopf_scheduler.framework.go_duration import go_duration

DEFAULT_FILTER_TIMEOUT_SECONDS = 10.0
#: upstream only refuses negative values: Filter runs in the synchronous scheduling cycle, so one node's
#: search may hold every profile's pods this long at most (the extenders' ``httpTimeout`` bound too)
MAX_FILTER_TIMEOUT_SECONDS = 300.0
DEFAULT_BINDING_TIMEOUT_SECONDS = 600.0
MIN_BINDING_TIMEOUT_SECONDS = 1.0
#: a day (upstream sets no upper bound): PreBind holds the pod's binding that long at most, as
#: VolumeBinding's ``bindTimeoutSeconds``
MAX_BINDING_TIMEOUT_SECONDS = 24 * 60 * 60.0
_BINDING_GATES = ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus")


@dataclass
class Args:
    #: None: not set (the default applies only while ``DRASchedulerFilterTimeout`` is on)
    filter_timeout_seconds: float | None = None
    #: None: not set (the default applies only while the binding-condition gates are on)
    binding_timeout_seconds: float | None = None
    #: both binding-condition gates are on (``set_defaults``): ``bindingTimeout`` has an effect
    binding_conditions: bool = field(default=False, init=False)
    #: ``DRASchedulerFilterTimeout`` is on (``set_defaults``): ``filterTimeout`` has an effect
    filter_timeout_gate: bool = field(default=True, init=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        unknown = sorted(set(raw) - {"filterTimeout", "bindingTimeout"})
        if unknown:
            raise ArgsError(unknown[0], "unknown field; known: bindingTimeout, filterTimeout")
        return cls(_duration(raw, "filterTimeout"), _duration(raw, "bindingTimeout"))

    def set_defaults(self, gates: FeatureGates) -> None:
        self.filter_timeout_gate = gates.enabled("DRASchedulerFilterTimeout")
        if self.filter_timeout_seconds is None and self.filter_timeout_gate:
            self.filter_timeout_seconds = DEFAULT_FILTER_TIMEOUT_SECONDS
        self.binding_conditions = all(gates.enabled(gate) for gate in _BINDING_GATES)
        if self.binding_timeout_seconds is None and self.binding_conditions:
            self.binding_timeout_seconds = DEFAULT_BINDING_TIMEOUT_SECONDS

    def validate(self) -> None:
        self._validate_filter_timeout()
        timeout = self.binding_timeout_seconds
        if timeout is None:
            return
        if not self.binding_conditions:
            raise ArgsError(
                "bindingTimeout",
                forbidden(
                    "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"
                ),
            )
        if timeout < MIN_BINDING_TIMEOUT_SECONDS:
            raise ArgsError("bindingTimeout", invalid(go_duration(timeout), "must be at least 1 second"))
        if timeout > MAX_BINDING_TIMEOUT_SECONDS:
            raise ArgsError(
                "bindingTimeout",
                f"must be at most {go_duration(MAX_BINDING_TIMEOUT_SECONDS)} (PreBind holds the pod's "
                f"binding that long), not {go_duration(timeout)}",
            )

    def _validate_filter_timeout(self) -> None:
        timeout = self.filter_timeout_seconds
        if timeout is None:
            return
        if not self.filter_timeout_gate:
            # upstream's text names the gate "DRASchedulingFilterTimeout"
            raise ArgsError("filterTimeout", forbidden("DRASchedulingFilterTimeout feature gate is disabled"))
        if timeout < 0:
            raise ArgsError("filterTimeout", invalid(go_duration(timeout), "must be zero or positive"))
        if timeout > MAX_FILTER_TIMEOUT_SECONDS:
            raise ArgsError(
                "filterTimeout",
                f"must be at most {go_duration(MAX_FILTER_TIMEOUT_SECONDS)} (Filter runs in the scheduling "
                f"cycle), not {go_duration(timeout)}",
            )


def _duration(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgsError(key, f"must be a duration string, not {value!r}")
    try:
        return parse_duration(value)
    except DurationError as e:
        raise ArgsError(key, str(e)) from None
