"""The API server's answer to a conditional update, for the simulated controllers: 404 for an object that
is gone, 409 when ``metadata.resourceVersion`` is not the stored one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_scheduler.framework.client import APIError


def check_update(current: Mapping[str, Any] | None, obj: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    """``current`` when ``obj`` may replace it; raises ``APIError`` with the API server's words for
    ``what`` (``persistentvolumes "pv-1"``) otherwise."""
    if current is None:
        raise APIError(404, f"{what} not found")
    if (
        str((obj.get("metadata") or {}).get("resourceVersion") or "")
        != current["metadata"]["resourceVersion"]
    ):
        raise APIError(
            409,
            f"Operation cannot be fulfilled on {what}: the object has been modified; please apply "
            "your changes to the latest version and try again",
        )
    return current
