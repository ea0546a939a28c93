"""The plugin registry: explicit in-tree names, entry points (switchable off), duplicates refused."""

from types import SimpleNamespace
from typing import Any

import pytest

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.interface import FilterPlugin
from kopf_scheduler.framework.runtime import registry as registry_module
from kopf_scheduler.framework.runtime.registry import AUTOLOAD_OFF_ENV, Registry, RegistryError
from kopf_scheduler.plugins.registry import IN_TREE, new_registry


class Custom(FilterPlugin):
    name = "Custom"

    def filter(self, state: Any, pod: Any, node: Any) -> None:
        return None


CUSTOM = SimpleNamespace(NAME="Custom", Args=NoArgs, new=lambda args, handle: Custom())


class FakeEntryPoint:
    def __init__(self, name: str, target: Any, value: str = "pkg.module") -> None:
        self.name = name
        self.value = value
        self._target = target
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        return self._target


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> list[FakeEntryPoint]:
    found: list[FakeEntryPoint] = []

    def fake(group: str) -> list[FakeEntryPoint]:
        assert group == "kopf_scheduler.plugins"
        return list(found)

    monkeypatch.setattr(registry_module, "entry_points", fake)
    monkeypatch.delenv(AUTOLOAD_OFF_ENV, raising=False)
    return found


def test_in_tree_plugins_are_imported_by_name() -> None:
    registry = new_registry(autoload=False)
    assert registry.names() == sorted(IN_TREE)
    factory = registry.get("NodeName")
    assert factory.name == "NodeName"
    assert factory.new(factory.args_type(), None).name == "NodeName"
    assert registry.get("NodeName") is factory


def test_register_refuses_a_duplicate_name() -> None:
    registry = new_registry(autoload=False)
    with pytest.raises(RegistryError) as info:
        registry.register("NodeName", CUSTOM)
    assert str(info.value) == "plugin 'NodeName' is registered twice"


def test_register_adds_an_out_of_tree_plugin() -> None:
    registry = new_registry(autoload=False)
    registry.register("Custom", CUSTOM)
    assert "Custom" in registry
    assert isinstance(registry.get("Custom").new(NoArgs(), None), Custom)


def test_unknown_plugin() -> None:
    registry = new_registry(autoload=False)
    assert "Nope" not in registry
    with pytest.raises(RegistryError) as info:
        registry.get("Nope")
    assert str(info.value) == "unknown plugin 'Nope'"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            SimpleNamespace(NAME="Other", Args=NoArgs, new=lambda a, h: Custom()),
            "plugin 'Custom': its module declares NAME='Other'",
        ),
        (SimpleNamespace(NAME="Custom", new=lambda a, h: Custom()), "plugin 'Custom': "),
    ],
    ids=["name-mismatch", "missing-args"],
)
def test_malformed_plugin_source(source: Any, message: str) -> None:
    registry = Registry({"Custom": source}, autoload=False)
    with pytest.raises(RegistryError) as info:
        registry.get("Custom")
    assert str(info.value).startswith(message)


def test_entry_points_are_loaded_lazily(entry_points: list[FakeEntryPoint]) -> None:
    ep = FakeEntryPoint("Custom", CUSTOM)
    entry_points.append(ep)
    registry = new_registry()
    assert "Custom" in registry
    assert registry.names() == sorted([*IN_TREE, "Custom"])
    assert ep.loads == 0
    assert registry.get("Custom").name == "Custom"
    registry.get("Custom")
    assert ep.loads == 1


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_entry_points_disabled_by_environment(
    entry_points: list[FakeEntryPoint], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    entry_points.append(FakeEntryPoint("Custom", CUSTOM))
    entry_points.append(FakeEntryPoint("NodeName", CUSTOM))  # would be a duplicate if loaded
    monkeypatch.setenv(AUTOLOAD_OFF_ENV, value)
    registry = new_registry()
    assert "Custom" not in registry
    assert registry.names() == sorted(IN_TREE)


def test_explicit_autoload_beats_the_environment(
    entry_points: list[FakeEntryPoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    entry_points.append(FakeEntryPoint("Custom", CUSTOM))
    monkeypatch.setenv(AUTOLOAD_OFF_ENV, "1")
    assert "Custom" in new_registry(autoload=True)
    monkeypatch.delenv(AUTOLOAD_OFF_ENV)
    assert "Custom" not in new_registry(autoload=False)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["NodeName"], "plugin 'NodeName' is registered twice (entry point pkg.module)"),
        (["Custom", "Custom"], "plugin 'Custom' is registered twice (entry point pkg.module)"),
    ],
    ids=["shadows-in-tree", "two-entry-points"],
)
def test_entry_point_duplicates_are_refused(
    entry_points: list[FakeEntryPoint], names: list[str], message: str
) -> None:
    entry_points.extend(FakeEntryPoint(name, CUSTOM) for name in names)
    with pytest.raises(RegistryError) as info:
        new_registry()
    assert str(info.value) == message
