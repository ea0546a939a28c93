"""Scheduler extenders: HTTP services kube-scheduler consults at filter, prioritize, preempt and bind.

``wire`` is the JSON protocol (``k8s.io/kube-scheduler/extender/v1``), ``transport`` the HTTP client,
``extender`` one configured extender, ``scheduling`` where extenders take part in a scheduling cycle
(preemption's part is in ``framework.preemption``). A profile's extenders are ordered as kube-scheduler
orders them (``build_extenders``): the configured order, ignorable ones moved to the end.
"""

from __future__ import annotations

from collections.abc import Sequence

from kopf_scheduler.api.errors import join_path
from kopf_scheduler.api.extenders import ExtenderSpec
from kopf_scheduler.framework.extenders.extender import HTTPExtender
from kopf_scheduler.framework.extenders.transport import ExtenderError, ExtenderTransport, TLSError


def build_extenders(specs: Sequence[ExtenderSpec], transport: ExtenderTransport) -> list[HTTPExtender]:
    """The extenders of a profile in calling order (upstream's ``buildExtenders``: ignorable ones last).
    Raises ``TLSError`` for unusable TLS settings, its ``field`` the full path of the bad one."""
    ordered = [s for s in specs if not s.ignorable] + [s for s in specs if s.ignorable]
    extenders = []
    for spec in ordered:
        try:
            extenders.append(HTTPExtender(spec, transport))
        except TLSError as e:
            e.field = join_path(spec.path or "spec.extenders", "tlsConfig", e.field)
            raise
    return extenders


__all__ = ["ExtenderError", "ExtenderTransport", "HTTPExtender", "TLSError", "build_extenders"]
