"""GenericWorkload's metric families read from a scheduler's ``/metrics`` (kube-scheduler's secure port with
its self-signed certificate, or kopf-scheduler's): for each family that has a series, its type, its label
names and its series (counters' values, histograms' ``_count`` and ``_sum``; buckets left out), so two
schedulers' can be compared after the same run."""

from __future__ import annotations

import re
import ssl
import urllib.request
from typing import Any

#: what kube-scheduler v1.37.2 registers with GenericWorkload on (``metrics.go``), and the preemption
#: families of single pods that pod group preemption also feeds or must leave alone
FAMILIES = (
    "scheduler_podgroup_schedule_attempts_total",
    "scheduler_podgroup_scheduling_attempt_duration_seconds",
    "scheduler_podgroup_scheduling_algorithm_duration_seconds",
    "scheduler_workload_preemption_attempts_total",
    "scheduler_workload_preemption_victims",
    "scheduler_preemption_workload_disruptions",
    "scheduler_preemption_evaluation_duration_seconds",
    "scheduler_preemption_execution_duration_seconds",
    "scheduler_preemption_pdb_violations_total",
    "scheduler_preemption_goroutines_execution_total",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
)
_SAMPLE = re.compile(r"(\w+)(?:\{(.*)\})? (\S+)")
_SUFFIXES = ("_count", "_sum")


def scrape(url: str) -> dict[str, dict[str, Any]]:
    """family -> {"type", "labels" (sorted names), "series" (``name{k=v,...}`` -> value)}."""
    context = ssl._create_unverified_context()  # kube-scheduler's self-signed serving certificate
    with urllib.request.urlopen(url, timeout=10, context=context) as resp:
        text = resp.read().decode()
    types: dict[str, str] = {}
    out: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None:
            continue
        name = match.group(1)
        family = name
        if name.endswith("_bucket"):
            family = name[: -len("_bucket")]
        elif name not in types:
            family = next((name[: -len(s)] for s in _SUFFIXES if name.endswith(s)), name)
        if family not in FAMILIES:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        entry = out.setdefault(family, {"type": types.get(family, ""), "labels": set(), "series": {}})
        entry["labels"].update(k for k in labels if k != "le")
        if name.endswith("_bucket"):
            continue
        key = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        entry["series"][f"{name}{{{key}}}"] = float(match.group(3))
    for entry in out.values():
        entry["labels"] = sorted(entry["labels"])
    return out
