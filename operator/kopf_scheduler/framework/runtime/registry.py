"""The plugin registry: an explicit map of plugin name to the module that implements it.

A plugin module exposes ``NAME``, ``Args`` (a dataclass with ``validate()``) and ``new(args, handle)``.
In-tree plugins are listed by the caller (``kopf_scheduler.plugins.registry``); out-of-tree plugins come
from the entry-point group ``kopf_scheduler.plugins`` (entry name = plugin name, value = the module or an
object with the same attributes) and are imported only when a profile uses them. Setting
``KOPF_SCHEDULER_DISABLE_PLUGIN_AUTOLOAD=1`` turns entry-point loading off. A name registered twice is
refused.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import Plugin

ENTRY_POINT_GROUP = "kopf_scheduler.plugins"
AUTOLOAD_OFF_ENV = "KOPF_SCHEDULER_DISABLE_PLUGIN_AUTOLOAD"


class RegistryError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class PluginFactory:
    name: str
    args_type: type
    new: Callable[[Any, Handle], Plugin]


def _as_factory(name: str, source: Any) -> PluginFactory:
    try:
        declared, args_type, new = source.NAME, source.Args, source.new
    except AttributeError as e:
        raise RegistryError(f"plugin {name!r}: {source!r} lacks NAME, Args or new ({e})") from None
    if declared != name:
        raise RegistryError(f"plugin {name!r}: its module declares NAME={declared!r}")
    return PluginFactory(name, args_type, new)


class Registry:
    def __init__(self, in_tree: Mapping[str, str | Any], autoload: bool | None = None) -> None:
        self._sources: dict[str, str | Any] = dict(in_tree)
        self._loaded: dict[str, PluginFactory] = {}
        self._entry_points: dict[str, Any] = {}
        if autoload is None:
            autoload = os.environ.get(AUTOLOAD_OFF_ENV, "") not in ("1", "true", "yes")
        if autoload:
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                if ep.name in self._sources or ep.name in self._entry_points:
                    raise RegistryError(f"plugin {ep.name!r} is registered twice (entry point {ep.value})")
                self._entry_points[ep.name] = ep

    def register(self, name: str, source: str | Any) -> None:
        """Adds an out-of-tree plugin (a module path or an object with NAME, Args, new)."""
        if name in self._sources or name in self._entry_points:
            raise RegistryError(f"plugin {name!r} is registered twice")
        self._sources[name] = source

    def names(self) -> list[str]:
        return sorted({*self._sources, *self._entry_points})

    def __contains__(self, name: object) -> bool:
        return name in self._sources or name in self._entry_points

    def get(self, name: str) -> PluginFactory:
        factory = self._loaded.get(name)
        if factory is not None:
            return factory
        if name in self._sources:
            source = self._sources[name]
            if isinstance(source, str):
                source = importlib.import_module(source)
        elif name in self._entry_points:
            source = self._entry_points[name].load()
        else:
            raise RegistryError(f"unknown plugin {name!r}")
        factory = self._loaded[name] = _as_factory(name, source)
        return factory
