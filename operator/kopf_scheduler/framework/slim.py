"""API objects as the scheduler keeps them: without ``metadata.managedFields`` (``slim``), and with one string
of each spelling (``kept``).

Server-side-apply bookkeeping is most of a pod's or node's nested dicts and nothing the scheduler reads.
Keeping thousands of pods without it takes less memory, and the cyclic garbage collector, which walks
every live dict on a full pass, pauses the event loop for much less.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def slim(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` without ``metadata.managedFields``: a shallow copy when it had them, else ``obj`` itself."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


_intern = sys.intern
#: whether string values are interned too. CPython 3.12 makes interned strings immortal (3.11 and 3.13+
#: free one with its last user), so there a pod's uid or name, once interned, would outlive the pod: only
#: keys, a bounded vocabulary (field names, label keys), are interned there.
_SHARE_VALUES = sys.version_info[:2] != (3, 12)


def kept(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` as the cache and the queue keep it: ``slim``, and a copy whose keys and string values are
    the one string of each spelling (``sys.intern``) instead of each object's own.

    An object received from the watch intake process is rebuilt by ``pickle.loads`` with a new string for
    every key ("metadata", "containers", "terminationMessagePath", ...) and every value ("IfNotPresent",
    the namespace, the node's name), and one read from a list shares its keys only with the objects of
    the same page: shared, a bound pod of the benchmark keeps about half the bytes. Mappings other than
    ``dict`` (and a ``dict`` key that is not a string) are kept as they are."""
    if type(obj) is not dict:
        return slim(obj)
    meta = obj.get("metadata")
    if type(meta) is dict and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    shared: Mapping[str, Any] = _shared(obj)
    return shared


def _shared(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return _intern(value) if _SHARE_VALUES else value
    if kind is dict:
        try:
            return {_intern(k): _shared(v) for k, v in value.items()}
        except TypeError:  # a key that is not a string: kept as it is (a parser names the field)
            return {(_intern(k) if type(k) is str else k): _shared(v) for k, v in value.items()}
    if kind is list:
        return [_shared(v) for v in value]
    return value
