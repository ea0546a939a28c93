"""Runs the scheduling process: Kopf with the start-up, clean-up and probe handlers of ``lifecycle``,
cluster-wide and standalone (one active instance is ensured by the scheduler's Lease, not by Kopf's
peering); the start-up handler starts the watch intake process (``intake``), which watches once the
scheduler's initial lists are loaded.

The exit code says how it ended: 0 for a stop by signal, 1 when the operator stopped itself on a failure
(a background task died, the Lease was lost, the metrics port was taken: ``supervision``) or could not
serve a port at all. A port in use is found before Kopf starts, with one line naming it.
"""

from __future__ import annotations

import asyncio
import logging

import kopf

from kopf_scheduler.handlers import lifecycle, logs
from kopf_scheduler.service import config
from kopf_scheduler.service.supervision import Supervisor, port_taken

log = logging.getLogger("kopf_scheduler")


def main(verbose: bool = False, liveness_port: int = 8080, metrics_port: int | None = None) -> int:
    logs.configure(verbose)
    if metrics_port is None:
        metrics_port = config.metrics_port_from_env()
    for what, port in (("metrics", metrics_port), ("liveness", liveness_port)):
        error = port_taken(port)
        if error is not None:
            log.error("%s port %d is in use (%s): the scheduler does not start", what, port, error)
            return 1
    # an asyncio.Event (bound to Kopf's loop on first use, set from it): Kopf waits for a threading
    # flag in an executor thread, which would keep the process from exiting after a stop by signal
    stop = asyncio.Event()
    supervisor = Supervisor(on_fatal=stop.set)
    liveness = f"http://0.0.0.0:{liveness_port}/healthz" if liveness_port else None
    # this process serves the liveness probe and runs the scheduler; the watches run in the intake
    # process (``intake_link``), so its registry holds the start-up, clean-up and probe handlers only
    registry = lifecycle.new_registry()
    kopf.on.startup(registry=registry)(lifecycle.start)
    kopf.on.cleanup(registry=registry)(lifecycle.stop)
    kopf.on.probe(id="scheduler", registry=registry)(lifecycle.health)
    kopf.run(
        registry=registry,
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness,
        stop_flag=stop,
        memo=kopf.Memo(supervisor=supervisor, intake=True, verbose=verbose),
    )
    return 0 if supervisor.healthy else 1
