"""API requests a scheduler made, from the API server's own ``apiserver_request_total`` counter.

The counter has no user-agent or user label, so attribution is by isolation: every run has a fresh API
server whose only clients are the harness and the one scheduler under test. The scheduler's requests are
the counter's increase between a scrape just before the scheduler starts and one just after it has
stopped (so its start-up lists, its last event flushes and its closed watches are in), minus the
requests the harness itself sent in that window (it counts them: pod creations, force deletions, its
list and watch). Left out: non-resource requests (``/metrics``, ``/healthz``, discovery) and
``coordination.k8s.io`` leases, which only the API server's own identity heartbeat writes here (every
scheduler runs without leader election). Watches are counted when they end.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

#: (verb, group, resource, subresource)
Key = tuple[str, str, str, str]

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"})
EXCLUDED_RESOURCES = frozenset({("coordination.k8s.io", "leases")})
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> Counter[Key]:
    """Sum ``apiserver_request_total`` over codes and the other labels, by (verb, group, resource, sub)."""
    counts: Counter[Key] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_part, _, value = line.rpartition(" ")
        labels = dict(_LABEL.findall(labels_part))
        resource = labels.get("resource", "")
        if not resource:
            continue
        key = (labels.get("verb", ""), labels.get("group", ""), resource, labels.get("subresource", ""))
        counts[key] += int(float(value))
    return counts


def scheduler_requests(
    before: Mapping[Key, int], after: Mapping[Key, int], harness: Mapping[Key, int]
) -> Counter[Key]:
    """``after - before - harness``, without the excluded resources; negative leftovers dropped."""
    out: Counter[Key] = Counter()
    for key in set(after) | set(before):
        if (key[1], key[2]) in EXCLUDED_RESOURCES:
            continue
        n = after.get(key, 0) - before.get(key, 0) - harness.get(key, 0)
        if n > 0:
            out[key] = n
    return out


def label(key: Key) -> str:
    """``"POST pods/binding"``, ``"POST events.k8s.io/events"``."""
    verb, group, resource, sub = key
    name = f"{group}/{resource}" if group else resource
    return f"{verb} {name}/{sub}" if sub else f"{verb} {name}"


def is_event(key: Key) -> bool:
    return key[2] == "events"


def breakdown(requests: Mapping[Key, int], pods: int) -> dict[str, float]:
    """Per-pod figures: all requests, writes, writes other than events, event writes; plus counts."""
    total = sum(requests.values())
    writes = sum(n for k, n in requests.items() if k[0] in WRITE_VERBS)
    event_writes = sum(n for k, n in requests.items() if k[0] in WRITE_VERBS and is_event(k))
    per = max(pods, 1)
    return {
        "api_requests": total,
        "api_requests_per_pod": total / per,
        "api_writes_per_pod": writes / per,
        "api_writes_per_pod_without_events": (writes - event_writes) / per,
        "api_event_writes_per_pod": event_writes / per,
    }


def client_requests(text: str) -> dict[str, int]:
    """A client-go program's own count of its requests (``rest_client_requests_total``), by method."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("rest_client_requests_total{"):
            labels_part, _, value = line.rpartition(" ")
            labels = dict(_LABEL.findall(labels_part))
            out[labels.get("method", "?")] += int(float(value))
    return dict(out)


def metric_sum(text: str, name: str, label_filter: Mapping[str, str] | None = None) -> float:
    """Sum of every sample of ``name`` (e.g. ``..._seconds_sum``) whose labels include ``label_filter``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest[:1] not in ("{", " "):
            continue
        labels_part, _, value = line.rpartition(" ")
        labels = dict(_LABEL.findall(labels_part))
        if label_filter and any(labels.get(k) != v for k, v in label_filter.items()):
            continue
        try:
            total += float(value)
        except ValueError:
            continue
    return total
