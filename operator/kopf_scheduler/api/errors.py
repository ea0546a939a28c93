"""Validation errors that name the field path of the bad value."""

from __future__ import annotations


class ProfileError(ValueError):
    """An invalid SchedulingProfile; ``path`` is the field path (``spec.plugins.score.enabled[2].weight``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def join_path(base: str, *parts: str | int) -> str:
    path = base
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


class UsageError(Exception):
    """Bad input from a user of the command line (a file, a flag, a field): printed as one line naming what
    and where, exit code 2, no traceback."""


def json_type(value: object) -> str:
    """``value``'s JSON type as a one-line error names it (``status.allocatable: must be an object, not a
    string``), never the value itself: a wrong-typed field may hold a huge or deeply nested one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object"


def key_path(path: str, key: object) -> str:
    """``path.key`` for a map key in a field path (``status.allocatable.cpu``); a key that is not a
    printable string (a newline in a resource name) is quoted, ``path['a\\nb']``, so that the message
    stays one line."""
    if isinstance(key, str) and key.isprintable():
        return f"{path}.{key}"
    return f"{path}[{key!r}]"
