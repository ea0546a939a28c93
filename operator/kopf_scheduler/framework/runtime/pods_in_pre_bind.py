"""Pods in the PreBind phase of their binding cycle, which preemption may still stop (upstream's
``podsInPreBindMap``, kube-scheduler v1.36 on).

A pod is registered from the end of its Permit wait until its binding cycle ends. Preemption that picks it
as a victim cancels its binding instead of deleting it (``cancel_pod``), unless PreBind is already over:
once ``mark_prebound`` succeeded the pod is as good as bound, and is deleted like any other victim.

Invariants: ``cancel_pod`` and ``mark_prebound`` decide once between them: after a cancel, marking fails;
after marking, cancelling fails. The first cancel's message is the one the binding cycle reports.
"""

from __future__ import annotations

import asyncio


class PodInPreBind:
    """One pod in PreBind (upstream's ``podInPreBind``)."""

    __slots__ = ("_cancelled", "_finished", "message")

    def __init__(self) -> None:
        self._finished = False
        #: set once the binding is cancelled; ``message`` then says why
        self._cancelled = asyncio.Event()
        self.message = ""

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel_pod(self, message: str) -> bool:
        """Stops the pod's binding cycle (its PreBind plugins see the cancellation); False when PreBind is
        over already, so the binding cannot be stopped any more."""
        if self._finished:
            return False
        if not self._cancelled.is_set():
            self.message = message
            self._cancelled.set()
        return True

    def mark_prebound(self) -> bool:
        """PreBind is over: the pod may no longer be cancelled. False when it was cancelled already."""
        if self._cancelled.is_set():
            return False
        self._finished = True
        return True

    async def wait_cancelled(self) -> None:
        await self._cancelled.wait()


class PodsInPreBind:
    """The registered pods, by uid."""

    __slots__ = ("_pods",)

    def __init__(self) -> None:
        self._pods: dict[str, PodInPreBind] = {}

    def add(self, uid: str) -> PodInPreBind:
        """Registers ``uid`` (replacing an earlier registration) and returns its entry."""
        entry = PodInPreBind()
        self._pods[uid] = entry
        return entry

    def get(self, uid: str) -> PodInPreBind | None:
        return self._pods.get(uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def __len__(self) -> int:
        return len(self._pods)
