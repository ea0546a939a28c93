"""How both processes log: kube components' two formats. ``text`` lines carry the logger's full name;
``json`` lines are one JSON object each (``ts``, ``level``, ``logger``, ``msg``, the Kubernetes object
Kopf attached, ``error`` with the traceback), for log collectors. Kopf's own handler is kept (it
attaches the objects), only its formatter is replaced."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import kopf

from kopf_scheduler.service import config

TEXT = "[%(asctime)s] %(name)s [%(levelname)s] %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ref = getattr(record, "k8s_ref", None)  # Kopf's: the object a handler's message is about
        if ref:
            line["object"] = ref
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(verbose: bool) -> None:
    """Kopf's logging at its level, in the format ``--logging-format`` chose (``config``)."""
    kopf.configure(verbose=verbose, log_format=TEXT)  # type: ignore[arg-type]  # Kopf takes a format string too
    # no access line for every probe of Kopf's liveness endpoint
    logging.getLogger("aiohttp.access").setLevel(logging.DEBUG if verbose else logging.WARNING)
    if config.logging_format_from_env() == "json":
        formatter = JsonFormatter()
        for handler in logging.getLogger().handlers:
            handler.setFormatter(formatter)
