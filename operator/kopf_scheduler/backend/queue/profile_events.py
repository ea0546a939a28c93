"""Which events may help a rejected pod: the registered events and queueing hints of one profile.

A pod remembers the plugins that rejected it (``unschedulable_plugins``, ``pending_plugins``). For an
event, only those plugins' registrations in the pod's own profile are consulted (kube-scheduler's
``isPodWorthRequeuing``):

- no rejecting plugin recorded: any event may help (the failure was not a plugin's verdict);
- a wildcard event (unschedulable timeout, forced activation) helps every pod, or only the pod it names;
- otherwise a registration that matches the event and whose hint says QUEUE (no hint means QUEUE, a
  hint that raises counts as QUEUE so a buggy hint cannot strand pods) helps: if the plugin returned
  Pending the pod skips backoff, else it goes through backoff.

Rejecting plugins of a real framework that do not implement ``EnqueueExtensions`` are registered, with
no hint, for every action of the resources kube-scheduler unrolls for them (``UnrollWildCardResource``:
pods, nodes, volumes, storage classes, CSI objects, resource claims and device classes), as kube-scheduler
does for plugins that do not say what they wait for. Invariant: an index is rebuilt whenever the
profile's framework object changes.

Keyed hints (``KeyedHint``) let the queue skip pods without asking: a hint that also has ``pod_keys`` and
``event_keys`` promises to say SKIP for every pod whose keys miss the event's. When every registration an
event matches is keyed, only pool members sharing a key with the event (and those ``pod_keys`` gives no
keys for: no rejector recorded, no profile) need the full check.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping
from typing import Any, Protocol

from kopf_scheduler.framework.events import Action, ClusterEvent, HintFn, QueueingHint, Resource
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
)
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import Status


class QueueProfile(Protocol):
    """What the queue needs from a profile's framework."""

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None: ...

    def events_to_register(self) -> list[tuple[str, ClusterEvent, HintFn | None]]: ...


class KeyedHint(Protocol):
    """A queueing hint that can name the pods an event may concern.

    Contract: ``hint(pod, old, new)`` is SKIP whenever ``event_keys(old, new)`` is not None and shares
    no key with ``pod_keys(pod)``; ``pod_keys`` depends on the PodInfo object alone (a new version of the
    pod is a new object). None from ``event_keys``: any pod may be concerned.
    """

    def __call__(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint: ...

    def pod_keys(self, pod: PodInfo) -> frozenset[Hashable]: ...

    def event_keys(self, old: Any, new: Any) -> frozenset[Hashable] | None: ...


def _keyed(hint: HintFn | None) -> KeyedHint | None:
    if (
        hint is not None
        and callable(getattr(hint, "pod_keys", None))
        and callable(getattr(hint, "event_keys", None))
    ):
        return hint  # type: ignore[return-value]
    return None


class Strategy(enum.IntEnum):
    """Where an event sends a rejected pod (upstream's ``queueingStrategy``), in increasing urgency."""

    SKIP = 0  # stays in the unschedulable pool
    AFTER_BACKOFF = 1  # backoff queue if still backing off, else active queue
    IMMEDIATELY = 2  # active queue, backoff or not (a Pending plugin's wait is over)


#: extension points whose plugins can reject a pod, and so be the reason it waits
_REJECTING_POINTS = (PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, ReservePlugin, PermitPlugin)
#: what a rejecting plugin without ``EnqueueExtensions`` is registered for (``UnrollWildCardResource``)
CATCH_ALL_EVENTS = tuple(
    ClusterEvent(resource, Action.all())
    for resource in (
        Resource.ASSIGNED_POD,
        Resource.UNSCHEDULED_POD,
        Resource.TARGET_POD,
        Resource.NODE,
        Resource.PERSISTENT_VOLUME,
        Resource.PERSISTENT_VOLUME_CLAIM,
        Resource.CSI_NODE,
        Resource.CSI_DRIVER,
        Resource.CSI_STORAGE_CAPACITY,
        Resource.STORAGE_CLASS,
        Resource.RESOURCE_CLAIM,
        Resource.DEVICE_CLASS,
    )
)


def is_wildcard(event: ClusterEvent) -> bool:
    return event.resource is Resource.WILDCARD


_Registration = tuple[ClusterEvent, HintFn | None]


class ProfileEvents:
    """The registrations of one framework, indexed by plugin name, with a memo of events of interest."""

    __slots__ = (
        "_interest",
        "_keyed_for",
        "_keyed_hints",
        "_registered",
        "by_plugin",
        "framework",
    )

    def __init__(self, framework: QueueProfile) -> None:
        self.framework = framework
        by_plugin: dict[str, list[_Registration]] = {}
        for plugin, event, hint in framework.events_to_register():
            by_plugin.setdefault(plugin, []).append((event, hint))
        plugins = getattr(framework, "plugins", None)
        for name, plugin in plugins.items() if isinstance(plugins, Mapping) else ():
            if isinstance(plugin, _REJECTING_POINTS) and not isinstance(plugin, EnqueueExtensions):
                by_plugin.setdefault(name, []).extend((event, None) for event in CATCH_ALL_EVENTS)
        self.by_plugin: dict[str, tuple[_Registration, ...]] = {k: tuple(v) for k, v in by_plugin.items()}
        self._interest: dict[ClusterEvent, bool] = {}
        self._registered: dict[ClusterEvent, bool] = {}
        keyed: dict[int, KeyedHint] = {}
        for regs in self.by_plugin.values():
            for _, hint in regs:
                found = _keyed(hint)
                if found is not None:
                    keyed[id(found)] = found
        self._keyed_hints: tuple[KeyedHint, ...] = tuple(keyed.values())
        #: per event: the keyed hints of the registrations it matches; None when one of them is not keyed
        self._keyed_for: dict[ClusterEvent, tuple[KeyedHint, ...] | None] = {}

    def interested(self, event: ClusterEvent) -> bool:
        """Whether any plugin of this profile could be moved by ``event``."""
        known = self._interest.get(event)
        if known is None:
            known = is_wildcard(event) or self.registered(event)
            self._interest[event] = known
        return known

    def registered(self, event: ClusterEvent) -> bool:
        """Whether a plugin of this profile registered an event ``event`` matches."""
        known = self._registered.get(event)
        if known is None:
            known = self._registered[event] = any(
                registered.matches(event) for regs in self.by_plugin.values() for registered, _ in regs
            )
        return known

    def pod_keys(self, qp: QueuedPodInfo) -> frozenset[Hashable] | None:
        """The keys of every keyed hint for the pod; None when an event may move it whatever its keys
        (no rejector recorded)."""
        if not (qp.unschedulable_plugins or qp.pending_plugins):
            return None
        hints = self._keyed_hints
        if not hints:
            return frozenset()
        if len(hints) == 1:
            return hints[0].pod_keys(qp.pod)
        return frozenset().union(*(hint.pod_keys(qp.pod) for hint in hints))

    def event_keys(self, event: ClusterEvent, old: Any, new: Any) -> frozenset[Hashable] | None:
        """The keys a pod must share for ``event`` to move it (see ``pod_keys``); None: any pod may move."""
        if is_wildcard(event):
            return None
        if event in self._keyed_for:
            hints = self._keyed_for[event]
        else:
            found: dict[int, KeyedHint] | None = {}
            for regs in self.by_plugin.values():
                for registered, hint in regs:
                    if not registered.matches(event):
                        continue
                    keyed = _keyed(hint)
                    if keyed is None or found is None:
                        found = None
                        break
                    found[id(keyed)] = keyed
            hints = self._keyed_for[event] = None if found is None else tuple(found.values())
        if hints is None:
            return None
        keys: frozenset[Hashable] = frozenset()
        for hint in hints:
            more = hint.event_keys(old, new)
            if more is None:
                return None
            keys = keys | more if keys else more
        return keys

    def gating_matches(self, plugin: str, event: ClusterEvent) -> bool:
        """Whether the gating PreEnqueue plugin registered ``event`` (wildcards match only wildcards)."""
        return any(registered.matches(event) for registered, _ in self.by_plugin.get(plugin, ()))

    def _verdicts(self, plugin: str, qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """Whether any of ``plugin``'s registrations matching ``event`` says QUEUE for this pod."""
        for registered, hint in self.by_plugin.get(plugin, ()):
            if not registered.matches(event):
                continue
            if hint is None:
                return True
            try:
                verdict = hint(qp.pod, old, new)
            except Exception:  # a failing hint must not strand the pod in the pool
                return True
            if verdict is not QueueingHint.SKIP:
                return True
        return False

    def strategy(self, qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> Strategy:
        """Where ``event`` sends ``qp`` (not wildcard, rejectors recorded: see ``requeue_strategy``)."""
        pending = qp.pending_plugins
        result = Strategy.SKIP
        for plugin in pending:
            if self._verdicts(plugin, qp, event, old, new):
                return Strategy.IMMEDIATELY
        for plugin in qp.unschedulable_plugins:
            if plugin in pending:
                continue
            if self._verdicts(plugin, qp, event, old, new):
                result = Strategy.AFTER_BACKOFF
                break
        return result


def requeue_strategy(
    profile: ProfileEvents | None, qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
) -> Strategy:
    """Where ``event`` (with its old and new objects) sends the rejected pod ``qp``."""
    if not qp.unschedulable_plugins and not qp.pending_plugins:
        return Strategy.AFTER_BACKOFF
    if is_wildcard(event):
        # A wildcard event carrying a pod is meant for that pod only (a forced activation).
        if new is not None and not (isinstance(new, PodInfo) and new.uid == qp.pod.uid):
            return Strategy.SKIP
        return Strategy.AFTER_BACKOFF
    if profile is None:  # the pod's profile is gone: let it retry rather than wait forever
        return Strategy.AFTER_BACKOFF
    return profile.strategy(qp, event, old, new)
