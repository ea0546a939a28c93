"""``Status.with_plugin``: a status a plugin returns for many nodes is named once, and naming it for
another plugin (two plugins sharing a module-level status) names that plugin, not the first."""

from __future__ import annotations

from kopf_scheduler.framework.status import Code, Status, error, unschedulable


def test_a_shared_status_is_named_for_each_plugin_that_returns_it() -> None:
    shared = unschedulable("Insufficient cpu")
    first = shared.with_plugin("NodeResourcesFit")
    assert first == Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "NodeResourcesFit")
    assert shared.with_plugin("NodeResourcesFit") is first  # made once
    other = shared.with_plugin("Other")
    assert other == Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "Other")
    assert shared.with_plugin("NodeResourcesFit") == first
    assert shared.plugin == ""  # the shared status itself is never changed
    fresh = unschedulable("Insufficient cpu")
    assert shared == fresh and hash(shared) == hash(fresh)  # the memo is not part of its value


def test_a_named_status_keeps_its_name_and_cause() -> None:
    cause = RuntimeError("boom")
    named = error("boom", plugin="A", cause=cause)
    assert named.with_plugin("B") is named
    assert error("boom", cause=cause).with_plugin("B").cause is cause
