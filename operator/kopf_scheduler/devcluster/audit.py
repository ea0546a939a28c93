"""Reading the dev cluster's audit log: the API server's own record of every write (see
``cluster.AUDIT_POLICY``), so a test can check who bound, deleted or patched which object and when
without trusting the scheduler's logs.

    for r in audit.read(cluster.audit_log):
        if r.is_binding and r.code == 201: ...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AuditRecord:
    """One ``ResponseComplete`` (or ``Panic``) audit event, reduced to what invariants are written on."""

    verb: str
    user: str
    user_agent: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    received: datetime
    completed: datetime

    @property
    def is_binding(self) -> bool:
        return self.resource == "pods" and self.subresource == "binding" and self.verb == "create"

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


def parse(event: dict[str, Any]) -> AuditRecord | None:
    """The record of one audit event; None for stages other than the request's end."""
    if event.get("stage") not in ("ResponseComplete", "Panic"):
        return None
    ref = event.get("objectRef") or {}
    user = event.get("impersonatedUser") or event.get("user") or {}
    return AuditRecord(
        verb=event.get("verb", ""),
        user=user.get("username", ""),
        user_agent=event.get("userAgent", ""),
        resource=ref.get("resource", ""),
        subresource=ref.get("subresource", ""),
        namespace=ref.get("namespace", ""),
        name=ref.get("name", ""),
        code=int((event.get("responseStatus") or {}).get("code", 0)),
        received=_time(event.get("requestReceivedTimestamp")),
        completed=_time(event.get("stageTimestamp")),
    )


def read(path: Path) -> list[AuditRecord]:
    """Every completed request in the log at ``path`` (empty when there is none yet), in log order. A
    line cut short by a concurrent write is skipped."""
    return list(_records(path))


def _records(path: Path) -> Iterator[AuditRecord]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        record = parse(event)
        if record is not None:
            yield record


def _time(value: str | None) -> datetime:
    if not value:
        return datetime.min.replace(tzinfo=UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
