"""Plugin results: a frozen ``Status`` with kube-scheduler's codes.

``None`` stands for success everywhere a plugin returns a status, so the common path allocates nothing.
Expected outcomes (unschedulable, unresolvable, skip, wait, pending) are returned; unexpected failures are
raised by plugins and turned into an ``ERROR`` status naming the plugin by the runtime.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    #: the pod does not fit now; preemption may help.
    UNSCHEDULABLE = 2
    #: the pod does not fit and preemption cannot help on this node.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    #: permit: the pod waits for an allow or reject.
    WAIT = 4
    #: the plugin has nothing to do for this pod (pre-filter, pre-score, bind).
    SKIP = 5
    #: the pod waits for something outside the scheduler (no backoff on requeue).
    PENDING = 6

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

_SUCCESS = Code.SUCCESS
_REJECTIONS = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    #: the plugin that returned it (set by the runtime when the plugin left it empty).
    plugin: str = ""
    #: the exception behind an ``ERROR`` status, when there is one (e.g. an ``APIError`` from binding).
    cause: BaseException | None = field(default=None, compare=False, repr=False)
    #: the copy ``with_plugin`` made last: a plugin that returns one status object for many nodes has it
    #: named once, not once per node (preemption's dry run asks thousands of nodes per pod)
    _named: Status | None = field(default=None, compare=False, repr=False, init=False)

    def message(self) -> str:
        return ", ".join(self.reasons)

    @property
    def is_rejection(self) -> bool:
        return self.code in _REJECTIONS

    @property
    def is_success(self) -> bool:
        return self.code is _SUCCESS

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin:
            return self
        named = self._named
        if named is None or named.plugin != plugin:
            # a direct construction: dataclasses.replace costs several times more, and this is on hot paths
            named = Status(self.code, self.reasons, plugin, self.cause)
            object.__setattr__(self, "_named", named)
        return named


def unschedulable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, plugin)


def unresolvable(*reasons: str, plugin: str = "") -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)


def error(*reasons: str, plugin: str = "", cause: BaseException | None = None) -> Status:
    return Status(Code.ERROR, reasons, plugin, cause)


SKIP = Status(Code.SKIP)
WAIT = Status(Code.WAIT)


def is_success(status: Status | None) -> bool:
    return status is None or status.code is _SUCCESS
