"""Gangs that come and go, for ``python -m bench soak``: PodGroups of scheduler-plugins' API (the form
``bench.gangs`` uses: ``minMember`` = ``GANG_SIZE``, members labelled ``scheduling.x-k8s.io/pod-group``,
``schedulerName: kopf-scheduler-gang``, the profile ``profiles/gang-scheduling.yaml``) in the namespace
``gangs``, made at a fixed rate by a thread of their own.

- A gang that fits: ``GANG_SIZE`` members of 1500m CPU. It must be bound whole; ``lifetime`` seconds after
  it was first seen whole, its members and its PodGroup are deleted.
- Every ``held_every``-th gang cannot fit: half of its members are like the others, half ask for 9 CPU,
  which no node has. The first half reach Permit and wait there until a member of the second half fails
  and the gang is rejected as a whole (waiting and rejected gang state); none may ever be bound. It is
  deleted ``lifetime`` seconds after it was made.

Each second a LIST of the bound pods of the namespace counts the bound members per gang (see
``bench.gangs``): a gang partly bound for over ``PARTIAL_GRACE`` seconds is *stuck*, a held gang with a
member bound is an error. ``finish`` stops making gangs and waits for every gang that fits to be whole.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from bench.gangs import (
    GANG_SCHEDULER,
    GANG_SIZE,
    GROUP_LABEL,
    MEMBER_CPU,
    PARTIAL_GRACE,
    bound_by_gang,
    pod_group,
)
from bench.sampling import summarize
from bench.workloads import _container, _pod
from kopf_scheduler.devcluster import ApiClient

NAMESPACE = "gangs"
#: a held gang's members that can never be placed: more CPU than a node has
UNFIT_CPU = "9"
TICK = 1.0


def gang_name(index: int) -> str:
    return f"gang-{index}"


def is_held(index: int, held_every: int) -> bool:
    """Whether gang ``index`` is one that cannot fit (every ``held_every``-th; 0: none)."""
    return held_every > 0 and index % held_every == held_every - 1


def member(gang: str, k: int, *, fits: bool) -> dict[str, Any]:
    """Member ``k`` of ``gang``: ``pod-default`` with 1500m CPU, or 9 CPU for the second half of a gang
    that does not fit."""
    cpu = MEMBER_CPU if fits or k < GANG_SIZE // 2 else UNFIT_CPU
    spec = {"containers": [_container(cpu=cpu)]}
    return _pod(f"{gang}-{k}", NAMESPACE, GANG_SCHEDULER, spec, {GROUP_LABEL: gang})


@dataclass
class Gang:
    name: str
    fits: bool
    created: float
    whole: float | None = None
    deleted: float | None = None
    partial_since: float | None = None
    most_bound: int = 0


class GangChurn:
    """Makes a gang every ``interval`` seconds (see the module) until ``finish``."""

    def __init__(self, api: ApiClient, interval: float, lifetime: float, held_every: int) -> None:
        self.api = api
        self.interval = interval
        self.lifetime = lifetime
        self.held_every = held_every
        self.gangs: dict[str, Gang] = {}
        self.errors: list[str] = []
        self.stuck: set[str] = set()
        #: held gangs seen with a member bound
        self.held_bound: set[str] = set()
        self.samples = 0
        self._making = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="gang-churn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self, timeout: float) -> bool:
        """Stops making gangs; True once every gang that fits is whole (False after ``timeout``)."""
        self._making = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._thread.is_alive():
            if all(g.whole is not None for g in self.gangs.values() if g.fits):
                break
            time.sleep(TICK)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        return all(g.whole is not None for g in self.gangs.values() if g.fits)

    def summary(self) -> dict[str, Any]:
        fit = [g for g in self.gangs.values() if g.fits]
        held = [g for g in self.gangs.values() if not g.fits]
        latency = summarize([g.whole - g.created for g in fit if g.whole is not None])
        return {
            "gang_size": GANG_SIZE,
            "gang_interval_s": self.interval,
            "gang_lifetime_s": self.lifetime,
            "gangs_created": len(self.gangs),
            "gangs_fitting": len(fit),
            "gangs_bound_whole": sum(1 for g in fit if g.whole is not None),
            "gangs_deleted_after_lifetime": sum(1 for g in fit if g.deleted is not None),
            "gangs_held": len(held),
            "gangs_held_deleted": sum(1 for g in held if g.deleted is not None),
            "gangs_held_with_a_member_bound": len(self.held_bound),
            "gangs_stuck_partial": len(self.stuck),
            "gang_bound_after_p50_s": _r(latency.get("p50")),
            "gang_bound_after_p99_s": _r(latency.get("p99")),
            "gang_bound_after_max_s": _r(latency.get("max")),
            "gang_samples": self.samples,
            "gang_errors": self.errors[:5],
        }

    def problems(self) -> list[str]:
        out = [f"gangs: {e}" for e in self.errors[:3]]
        unbound = sorted(g.name for g in self.gangs.values() if g.fits and g.whole is None)
        if unbound:
            out.append(f"{len(unbound)} gangs that fit were never bound whole: {unbound[:5]}")
        if self.stuck:
            out.append(
                f"{len(self.stuck)} gangs partly bound for over {PARTIAL_GRACE:g} s: {sorted(self.stuck)[:5]}"
            )
        if self.held_bound:
            out.append(
                f"{len(self.held_bound)} gangs that cannot fit had a member bound: "
                f"{sorted(self.held_bound)[:5]}"
            )
        if not any(not g.fits for g in self.gangs.values()) and self.held_every:
            out.append("no gang that cannot fit was made")
        return out

    # -- the thread -----------------------------------------------------------------------------------

    def _main(self) -> None:
        started = time.monotonic()
        made = 0
        while not self._stop.is_set():
            now = time.monotonic()
            if self._making and now >= started + made * self.interval:
                self._make(made, now)
                made += 1
            try:
                self._observe(self._bound(), time.monotonic())
            except (OSError, ValueError, RuntimeError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")
            self._expire(time.monotonic())
            wait = TICK if not self._making else min(TICK, max(0.0, started + made * self.interval - now))
            self._stop.wait(wait)

    def _make(self, index: int, now: float) -> None:
        name = gang_name(index)
        fits = not is_held(index, self.held_every)
        group = self.api.request("POST", _podgroups(), pod_group(name, NAMESPACE))
        if group.status != 201:
            self.errors.append(f"PodGroup {name}: HTTP {group.status}: {group.text()[:200]}")
            return
        self.gangs[name] = Gang(name, fits, now)
        for k in range(GANG_SIZE):
            made = self.api.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", member(name, k, fits=fits)
            )
            if made.status != 201:
                self.errors.append(f"pod {name}-{k}: HTTP {made.status}: {made.text()[:200]}")

    def _bound(self) -> dict[str, int]:
        response = self.api.request(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?fieldSelector=spec.nodeName%21%3D", timeout=30
        )
        if not response.ok:
            raise RuntimeError(f"LIST bound pods: HTTP {response.status}")
        return dict(bound_by_gang(list(response.json().get("items") or [])))

    def _observe(self, counts: dict[str, int], now: float) -> None:
        self.samples += 1
        for gang in self.gangs.values():
            if gang.deleted is not None:
                continue  # being deleted: its members go one by one
            n = counts.get(gang.name, 0)
            gang.most_bound = max(gang.most_bound, n)
            if not gang.fits and n:
                self.held_bound.add(gang.name)
            if n >= GANG_SIZE and gang.whole is None:
                gang.whole = now
            if 0 < n < GANG_SIZE:
                gang.partial_since = gang.partial_since or now
                if now - gang.partial_since > PARTIAL_GRACE:
                    self.stuck.add(gang.name)
            else:
                gang.partial_since = None

    def _expire(self, now: float) -> None:
        for gang in self.gangs.values():
            if gang.deleted is not None:
                continue
            since = gang.whole if gang.fits else gang.created
            if since is not None and now >= since + self.lifetime:
                self._delete(gang)
                gang.deleted = now

    def _delete(self, gang: Gang) -> None:
        selector = quote(f"{GROUP_LABEL}={gang.name}", safe="")
        pods = self.api.request(
            "DELETE",
            f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={selector}",
            {"gracePeriodSeconds": 0},
            timeout=30,
        )
        group = self.api.request("DELETE", f"{_podgroups()}/{gang.name}")
        for what, response in (("pods", pods), ("PodGroup", group)):
            if not response.ok:
                self.errors.append(
                    f"delete {gang.name} {what}: HTTP {response.status}: {response.text()[:200]}"
                )


def _podgroups() -> str:
    return f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NAMESPACE}/podgroups"


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
