"""Objects that live on (simulate's input, the scheduling process's initial lists) are loaded with the cyclic
collector off, then frozen: the collector is as the caller had it afterwards, also when loading fails."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.service.gc_freeze import collector_paused


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.unfreeze()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_what_is_built_is_frozen_and_the_collector_is_back_on() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
        built = [{"metadata": {"name": f"node-{i}"}} for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(built)


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_a_failed_load_turns_the_collector_back_on() -> None:
    gc.enable()
    with pytest.raises(UsageError), collector_paused():
        raise UsageError("cluster.json:1:1: invalid JSON: Expecting value")
    assert gc.isenabled()
