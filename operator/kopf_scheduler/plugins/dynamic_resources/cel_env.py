"""Device selectors: CEL expressions over one device, evaluated with ``celpy`` in the environment the
DRA library declares (``k8s.io/dynamic-resource-allocation/cel/compile.go``).

- The variable ``device`` has ``driver`` (string), ``allowMultipleAllocations`` (a bool, as declared with
  consumable capacity), ``attributes`` and ``capacity``: maps from a domain to maps from an identifier to
  the value. A qualified name without a domain is in the driver's domain.
  Looking up a domain the device has nothing in gives an empty map (so ``has(...)`` is false and a field
  of it fails with ``no such key``); a version attribute is a semver value, a capacity a quantity.
- Functions: the quantity and semver libraries and the common string extensions (``cel_library``).
- Compilation happens once per expression (an LRU cache shared by the plugin's cycles). What cel-go's
  checker refuses and ``celpy`` would only find at run time is refused at compile time here too: an
  identifier other than ``device`` (or a macro's variable), an unknown function or method, a field of
  ``device`` it does not have. Errors are worded and placed as upstream's (``compilation failed: ERROR:
  <input>:1:1: undeclared reference to 'x' (in container '')``, a call at its ``(``, a field at its
  ``.``; ``no such key: model``), except that a syntax error stops at the offending input: cel-go's
  ANTLR parser adds what it expected there (``expecting {'[', '{', ...}``), which ``celpy``'s parser
  cannot tell the same way. kube-apiserver refuses such selectors when a claim or class is written.
- Cost: cel-go stops an evaluation past ``CELSelectorExpressionMaxCost`` (1,000,000) units with ``operation
  cancelled: actual cost limit exceeded``; the same units are counted here (``cel_cost``).
- Time: celpy takes microseconds per step where cel-go takes nanoseconds, so a selector far below the
  cost limit can still run for seconds. The selectors of one claim get ``CLAIM_SECONDS`` of evaluation
  per scheduling attempt (a ``Clock`` per claim); past it the evaluation stops (``SelectorTimeout``) and
  the attempt fails. What was found of each device before is kept, so the next attempt goes on from
  there; a time-out is never kept, as it says nothing of the device.
- The commonest selector, a class's ``device.driver == "<literal>"`` (either side, either quote, no
  escapes), is answered by comparing the driver's name: it can neither fail nor cost anything, and
  ``celpy`` would take tens of microseconds per device for it.
"""

from __future__ import annotations

import functools
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes

from kopf_scheduler.framework.objects.dra import Attribute
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.plugins.dynamic_resources.cel_cost import (
    Budget,
    CostExceeded,
    Facts,
    Interrupted,
    facts_of,
)
from kopf_scheduler.plugins.dynamic_resources.cel_evaluator import CostEvaluator
from kopf_scheduler.plugins.dynamic_resources.cel_library import FUNCTIONS, Quantity, semver_of

COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
#: how long the selectors of one claim may be evaluated in one scheduling attempt
CLAIM_SECONDS = 0.1
_DEVICE_FIELDS = frozenset({"driver", "allowMultipleAllocations", "attributes", "capacity"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
#: global functions and methods celpy has built in that cel-go's standard environment has too
_BUILTINS = frozenset(
    {"size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string", "bool"}
    | {"bytes", "type", "dyn", "has", "duration", "timestamp"}
)
_KNOWN_FUNCTIONS = _BUILTINS | FUNCTIONS.keys() | _MACROS


@functools.cache
def _env() -> celpy.Environment:
    """The CEL environment, built on first use: building its parser takes a noticeable part of a
    second, which a scheduler whose pods claim no devices need not pay at start."""
    return celpy.Environment()


_DRIVER = r"device\s*\.\s*driver"
_LITERAL = r"""(?:"(?P<d{n}>[^"\\\n]*)"|'(?P<s{n}>[^'\\\n]*)')"""
#: ``device.driver == "<literal>"``, or the literal first
_DRIVER_IS = re.compile(
    rf"\s*(?:{_DRIVER}\s*==\s*{_LITERAL.format(n=1)}|{_LITERAL.format(n=2)}\s*==\s*{_DRIVER})\s*"
)


class SelectorError(Exception):
    """A selector that cannot be compiled (``compile_error``) or evaluated; the message is upstream's
    detail."""

    def __init__(self, detail: str, compile_error: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.compile_error = compile_error


class SelectorTimeout(Exception):
    """The claim's ``Clock`` ran out while its selector ran (or before it started). ``verdict`` adds which
    selector of the class's or the request's it was."""

    def __init__(self, expression: str, seconds: float) -> None:
        super().__init__(expression)
        self.expression, self.seconds = expression, seconds
        self.of_request, self.index = False, 0


class Clock:
    """The evaluation time the selectors of one claim have left in one scheduling attempt."""

    __slots__ = ("left", "seconds")

    def __init__(self, seconds: float | None = None) -> None:
        self.left = self.seconds = CLAIM_SECONDS if seconds is None else seconds


class _Runner(celpy.InterpretedRunner):
    def __init__(self, ast: lark.Tree, facts: Facts) -> None:
        super().__init__(_env(), ast, FUNCTIONS)
        self.facts = facts
        #: the environment's names and functions; each evaluation works on a copy (``set_activation``)
        self.activation = self.new_activation()

    def run(self, context: Any, budget: Budget) -> Any:
        """The value; raises ``CELEvalError``, ``CostExceeded`` and ``Interrupted``."""
        return CostEvaluator(self.ast, self.activation, budget, self.facts).evaluate(context)


# -- compilation ----------------------------------------------------------------------------------------
def _located(message: str, expression: str, line: int, column: int) -> str:
    text = expression.splitlines()[line - 1] if expression.splitlines() else ""
    return f"ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {'.' * (column - 1)}^"


def _position(expression: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of ``offset`` in ``expression``."""
    line = expression.count("\n", 0, offset) + 1
    return line, offset - (expression.rfind("\n", 0, offset) + 1) + 1


def _where(expression: str, token: Any, at: str) -> tuple[int, int]:
    """Where cel-go places an error about ``token``: a call at its ``(`` (``at="call"``), a field
    selection at its ``.`` (``at="select"``), anything else at the token."""
    start, end = int(token.start_pos), int(token.end_pos)
    if at == "call" and (paren := expression.find("(", end)) >= 0:
        return _position(expression, paren)
    if at == "select" and (dot := expression.rfind(".", 0, start)) >= 0:
        return _position(expression, dot)
    return _position(expression, start)


def _ident(tree: lark.Tree) -> str | None:
    """The name when ``tree`` is an expression made of a bare identifier."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and tree.data != "ident":
        child = tree.children[0]
        if not isinstance(child, lark.Tree):
            return None
        tree = child
    if isinstance(tree, lark.Tree) and tree.data == "ident":
        return str(tree.children[0])
    return None


def _check(ast: lark.Tree, expression: str) -> None:
    """What cel-go's checker refuses at compile time: undeclared names and fields of ``device``."""
    bound = set()
    for node in ast.iter_subtrees():
        if node.data == "member_dot_arg" and str(node.children[1]) in _MACROS:
            args = node.children[2]
            if isinstance(args, lark.Tree) and args.children:
                name = _ident(args.children[0])
                if name is not None:
                    bound.add(name)
    for node in ast.iter_subtrees_topdown():
        token: Any = None
        at = "token"
        if node.data == "ident" and str(node.children[0]) not in bound and node.children[0] != "device":
            token, what = node.children[0], f"undeclared reference to '{node.children[0]}' (in container '')"
        elif node.data in ("ident_arg", "member_dot_arg"):
            name = node.children[1] if node.data == "member_dot_arg" else node.children[0]
            if str(name) not in _KNOWN_FUNCTIONS:
                token, what, at = name, f"undeclared reference to '{name}' (in container '')", "call"
        elif (
            node.data == "member_dot"
            and _ident(node.children[0]) == "device"
            and str(node.children[1]) not in _DEVICE_FIELDS
        ):
            token, what, at = node.children[1], f"undefined field '{node.children[1]}'", "select"
        if token is not None:
            line, column = _where(expression, token, at)
            raise SelectorError("compilation failed: " + _located(what, expression, line, column), True)


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    runner: _Runner | None
    #: the compile error detail, "" when it compiled
    error: str
    #: the driver name of a ``device.driver == "<literal>"`` selector (None: another selector)
    driver_is: str | None = None


class SelectorCache:
    """Compiled expressions, the most recently used ``size`` of them kept."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._compiled: OrderedDict[str, CompiledSelector] = OrderedDict()

    def get_or_compile(self, expression: str) -> CompiledSelector:
        found = self._compiled.get(expression)
        if found is not None:
            self._compiled.move_to_end(expression)
            return found
        found = compile_selector(expression)
        self._compiled[expression] = found
        if len(self._compiled) > self.size:
            self._compiled.popitem(last=False)
        return found


def compile_selector(expression: str) -> CompiledSelector:
    try:
        ast = _env().compile(expression)
        _check(ast, expression)
    except celpy.CELParseError as e:
        line, column = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
        cause = e.__context__
        token = getattr(cause, "token", None)
        if token is not None and getattr(token, "type", "") == "$END":
            line, column = _position(expression, len(expression))  # cel-go: just past the end
            what = "Syntax error: mismatched input '<EOF>'"
        elif token is not None:
            what = f"Syntax error: mismatched input '{token}'"
        else:
            what = "Syntax error: token recognition error"
        detail = "compilation failed: " + _located(what, expression, line, column)
        return CompiledSelector(expression, None, detail)
    except SelectorError as e:
        return CompiledSelector(expression, None, e.detail)
    found = _DRIVER_IS.fullmatch(expression)
    driver_is = None if found is None else next(g for g in found.groups() if g is not None)
    return CompiledSelector(expression, _Runner(ast, facts_of(ast)), "", driver_is)


# -- evaluation -----------------------------------------------------------------------------------------
class _DomainMap(celtypes.MapType):
    """``device.attributes`` and ``device.capacity``: a domain absent from the device is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _value(attribute: Attribute) -> Any:
    kind, value = attribute
    if kind == "int":
        return celtypes.IntType(value)
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "string":
        return celtypes.StringType(str(value))
    version = semver_of(str(value))
    if version is None:
        raise SelectorError(f"parse semantic version: Invalid semver: {value!r}", False)
    return version


def _domains(items: Mapping[str, Any], driver: str) -> _DomainMap:
    by_domain: dict[str, dict[celtypes.StringType, Any]] = {}
    for name, value in items.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        by_domain.setdefault(domain, {})[celtypes.StringType(ident)] = value
    return _DomainMap({celtypes.StringType(d): celtypes.MapType(m) for d, m in by_domain.items()})


def device_context(
    driver: str, attributes: Mapping[str, Attribute], capacity: Mapping[str, Any], multiple: bool = False
) -> Any:
    """The ``device`` variable of one device; raises ``SelectorError`` for an unreadable attribute."""
    device = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(multiple),
            celtypes.StringType("attributes"): _domains(
                {n: _value(a) for n, a in attributes.items()}, driver
            ),
            celtypes.StringType("capacity"): _domains({n: Quantity(q) for n, q in capacity.items()}, driver),
        }
    )
    return {"device": device}


def _runtime_detail(error: celpy.CELEvalError) -> str:
    message = str(error.args[0]) if error.args else "evaluation failed"
    if message.startswith("no such member in mapping: "):
        return "no such key: " + message.removeprefix("no such member in mapping: ").strip("'\"")
    if "overload" in message:
        return "no such overload"
    if "divide by zero" in message:
        return "division by zero"
    return message


def matches(selector: CompiledSelector, context: Any, deadline: float = 0.0) -> bool:
    """Whether the device of ``context`` satisfies the compiled selector; raises ``SelectorError``, and
    ``SelectorTimeout`` past ``deadline`` (a ``time.perf_counter()``; 0: none)."""
    if selector.runner is None:
        raise SelectorError(selector.error, True)
    try:
        result = selector.runner.run(context, Budget(deadline))
    except celpy.CELEvalError as e:
        raise SelectorError(_runtime_detail(e), False) from None
    except (CostExceeded, RecursionError):
        raise SelectorError(COST_EXCEEDED, False) from None
    except Interrupted:
        raise SelectorTimeout(selector.expression, 0.0) from None
    if not isinstance(result, celtypes.BoolType):
        type_name = type(result).__name__.removesuffix("Type").lower()
        raise SelectorError(f"CEL result of type {type_name} could not be converted to bool", False)
    return bool(result)


class DeviceMatcher:
    """Selector results per device, kept while the device (its ResourceSlice version) lives: a device's
    attributes never change, so neither does what a selector says of it."""

    def __init__(self, cache: SelectorCache | None = None) -> None:
        self.cache = cache or SelectorCache()
        self._results: weakref.WeakKeyDictionary[Device, dict[str, bool | SelectorError]] = (
            weakref.WeakKeyDictionary()
        )
        self._contexts: weakref.WeakKeyDictionary[Device, Any] = weakref.WeakKeyDictionary()

    def matches(self, expression: str, driver: str, device: Device, clock: Clock | None = None) -> bool:
        """Raises ``SelectorError`` (compile or runtime); ``driver`` is the driver of the device's slice.
        An evaluation is charged to ``clock`` (None: no limit), and raises ``SelectorTimeout`` when it
        runs out."""
        results = self._results.get(device)
        if results is None:
            results = self._results[device] = {}
        found = results.get(expression)
        if found is None:
            compiled = self.cache.get_or_compile(expression)
            if compiled.driver_is is not None:
                found = driver == compiled.driver_is
            else:
                found = self._evaluate(compiled, driver, device, clock)
            results[expression] = found
        if isinstance(found, SelectorError):
            raise found
        return found

    def _evaluate(
        self, compiled: CompiledSelector, driver: str, device: Device, clock: Clock | None
    ) -> bool | SelectorError:
        start = time.perf_counter()
        if clock is not None and clock.left <= 0:
            raise SelectorTimeout(compiled.expression, clock.seconds)
        try:
            context = self._context(driver, device)
            return matches(compiled, context, 0.0 if clock is None else start + clock.left)
        except SelectorError as e:
            return e
        except SelectorTimeout:
            assert clock is not None
            raise SelectorTimeout(compiled.expression, clock.seconds) from None
        finally:
            if clock is not None:
                clock.left -= time.perf_counter() - start

    def _context(self, driver: str, device: Device) -> Any:
        context = self._contexts.get(device)
        if context is None:
            context = self._contexts[device] = device_context(
                driver, device.attributes, device.capacity, device.allow_multiple_allocations
            )
        return context
