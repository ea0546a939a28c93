"""Where a scheduling attempt reports what it took: upstream's metrics recorder.

The cycle and the binding cycle tell the recorder the duration of each extension point, and the end of
an attempt (bound, or failed with its reason); whoever wants those figures (the Prometheus metrics, a
test) subscribes a hook. Nothing here knows who listens, and nothing flows back to the scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kopf_scheduler.framework.pod_info import QueuedPodInfo
from kopf_scheduler.framework.status import Status

#: (extension point, status code label, profile, seconds)
ExtensionHook = Callable[[str, str, str, float], None]
#: (the pod's attempt, node, when the attempt started)
BoundHook = Callable[[QueuedPodInfo, str, float], None]
#: (the pod's attempt, event reason, message, result label, when the attempt started)
FailedHook = Callable[[QueuedPodInfo, str, str, str, float], None]


class Recorder:
    """Fans each observation out to the hooks subscribed to it; with no hook an observation costs a
    list check."""

    def __init__(self) -> None:
        self.extension_hooks: list[ExtensionHook] = []
        self.bound_hooks: list[BoundHook] = []
        self.failed_hooks: list[FailedHook] = []

    def observe(self, point: str, status: Status | None, profile: str, started: float) -> None:
        """``point`` of ``profile`` ran from ``started`` (``time.perf_counter``) until now."""
        if self.extension_hooks:
            seconds = time.perf_counter() - started
            label = "Success" if status is None else status.code.label
            for hook in self.extension_hooks:
                hook(point, label, profile, seconds)

    def bound(self, qp: QueuedPodInfo, node: str, started: float) -> None:
        for hook in self.bound_hooks:
            hook(qp, node, started)

    def failed(self, qp: QueuedPodInfo, reason: str, message: str, result: str, started: float) -> None:
        for hook in self.failed_hooks:
            hook(qp, reason, message, result, started)
