"""The feature gates the service runs with: ``--feature-gates`` over upstream's defaults at the emulated
version, which ``--emulated-version`` names or the API server's ``/version`` chooses
(``api/feature_gates.py``). Resolved once at start, before any profile is built; a refused gate stops
the service with its one-line message. The log says which version's gates are in force and why, and
which of their defaults kopf-scheduler does not yet implement.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kopf_scheduler.api.feature_gates import (
    FeatureGates,
    choose_version,
    describe,
    parse_feature_gates,
)
from kopf_scheduler.framework.client import APIError

log = logging.getLogger("kopf_scheduler")


async def resolve_feature_gates(
    feature_gates: str,
    emulated_version: str,
    read_version: Callable[[], Awaitable[Mapping[str, Any] | None]],
) -> FeatureGates:
    """The gates in force. ``read_version`` reads the API server's ``/version`` (asked only without
    ``emulated_version``). Raises ``FeatureGateError``."""
    explicit = parse_feature_gates(feature_gates)
    server: Mapping[str, Any] | None = None
    error = ""
    if not emulated_version:
        try:
            server = await read_version()
        except (APIError, OSError) as e:
            error = str(e) or type(e).__name__
    chosen = choose_version(emulated_version, server, error)
    gates = FeatureGates.resolve(chosen.version, explicit)
    first, *rest = describe(gates, chosen.reason)
    log.info(first)
    for line in rest:
        log.warning(line)
    return gates
