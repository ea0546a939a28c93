"""The intake process keeps nothing per object: Kopf's handling of each event (its own
``process_resource_event``, with the intake's settings and handlers) forwards the event and leaves no
per-object memory behind (``NoMemories``), where Kopf's default keeps one for every live object."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest
from kopf._cogs.structs import ephemera, references
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, processing

from kopf_scheduler.handlers.intake import _forwarder
from kopf_scheduler.handlers.lifecycle import NoMemories, configure, new_registry

PODS = references.Resource("", "v1", "pods", kind="Pod", namespaced=True, verbs=frozenset({"list", "watch"}))


class Pipe:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None, str]] = []

    def send(self, name: str, event: str | None, obj: Any) -> None:
        self.sent.append((name, event, obj["metadata"]["name"]))


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": "ns", "uid": f"uid-{i}", "resourceVersion": str(i)},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


async def handle(
    memories: inventory.ResourceMemories, events: list[tuple[str | None, dict[str, Any]]]
) -> Pipe:
    settings = kopf.OperatorSettings()
    configure(settings)
    registry = new_registry()
    pipe = Pipe()
    kopf.on.event("", "v1", "pods", id="pods_intake", registry=registry)(
        _forwarder("pods", pipe)  # type: ignore[arg-type]
    )
    for kind, obj in events:
        await processing.process_resource_event(
            lifecycle=lifecycles.get_default_lifecycle(),
            indexers=indexing.OperatorIndexers(),
            registry=registry,
            settings=settings,
            memories=memories,
            memobase=ephemera.AnyMemo(ephemera.Memo()),
            resource=PODS,
            raw_event={"type": kind, "object": obj},  # type: ignore[typeddict-item]
            event_queue=asyncio.Queue(),
            no_throttling=True,
        )
    return pipe


@pytest.mark.parametrize("memories", [inventory.ResourceMemories, NoMemories])
def test_every_event_is_forwarded_and_only_kopfs_default_remembers_objects(memories: type) -> None:
    store = memories()
    events = [(None, pod(0)), ("ADDED", pod(1)), ("MODIFIED", pod(1)), ("ADDED", pod(2)), ("DELETED", pod(2))]
    pipe = asyncio.run(handle(store, events))
    assert pipe.sent == [
        ("pods", None, "p-0"),
        ("pods", "ADDED", "p-1"),
        ("pods", "MODIFIED", "p-1"),
        ("pods", "ADDED", "p-2"),
        ("pods", "DELETED", "p-2"),
    ]
    remembered = len(list(store.iter_all_memories()))
    assert remembered == (0 if memories is NoMemories else 2)  # p-0 and p-1 live on in Kopf's default
