"""Runs Kopf with this package's handlers, cluster-wide and standalone (one active instance is ensured
by the scheduler's Lease, not by Kopf's peering)."""

from __future__ import annotations

import kopf

import kopf_scheduler.handlers  # noqa: F401 - registers the handlers


def main(verbose: bool = False, liveness_port: int = 8080) -> int:
    kopf.configure(verbose=verbose)
    liveness = f"http://0.0.0.0:{liveness_port}/healthz" if liveness_port else None
    kopf.run(clusterwide=True, standalone=True, liveness_endpoint=liveness)
    return 0
