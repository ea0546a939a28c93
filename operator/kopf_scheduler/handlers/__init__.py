"""Kopf handlers: the only code that imports kopf. Thin adapters that forward watch events to the
``SchedulerService`` kept in ``memo``; no decisions here.

Pods and nodes use ``@kopf.on.event`` only and return ``None``, so Kopf never patches, annotates or
finalizes a Pod or a Node. Two ways to run: ``kopf-scheduler run`` (``runner``) keeps the watches in the
intake process (``intake``: the same kinds, each event forwarded over a pipe) and registers only
``lifecycle`` in the scheduling process; ``kopf run -m kopf_scheduler.handlers -A --standalone`` runs
``lifecycle`` and ``watches`` (the same kinds, each event handed to the service) in one process. Kopf
logs in through ``login`` in every form: the scheduler's own credential loader, so watches and bindings
act as one identity.
"""

from kopf_scheduler.handlers import lifecycle, watches

__all__ = ["lifecycle", "watches"]
