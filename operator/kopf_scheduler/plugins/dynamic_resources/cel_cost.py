"""Upstream's cost of a device selector, counted while ``celpy`` evaluates it, and a deadline for it.

cel-go counts cost as its interpreter observes each step (``interpreter/runtimecost.go``: ``Observe`` and
``costCall``; the Kubernetes functions through ``apiserver/pkg/cel/library/cost.go``: ``CallCost``), and
kube-scheduler stops a selector past ``CELSelectorExpressionMaxCost`` (1,000,000) with ``operation
cancelled: actual cost limit exceeded``. The same units here:

- an identifier, a field selection, an index: 1 each (one more where a chain of them starts from
  something other than a variable, such as a literal or a call's result: cel-go's relative attribute);
  the last selection inside ``has()`` is free. Literals are free, and so are list and map literals made of
  literals and conversions of a literal (``OptOptimize`` folds them); other list literals cost 10, maps 30.
- a call: 1, or in proportion to sizes: ``==``/``!=`` the smaller operand's size / 10, ``<`` and friends
  on strings and bytes the same, ``+`` on strings the sum / 10, ``in`` a list its size (nothing for a
  list of literals); ``contains``, ``startsWith``, ``endsWith``, ``matches``, ``lowerAscii``,
  ``upperAscii``, ``trim``, ``replace``, ``split``, ``indexOf``, ``lastIndexOf``, ``quantity``,
  ``semver``, ``isQuantity``, ``isSemver`` as the tables there say. ``&&``, ``||`` and ``?:`` cost
  nothing, and decide as soon as one side does.
- the macros as cel-go expands them: per element, ``all`` 3 and ``exists`` 4 plus the predicate, stopping
  once the result is known (the check that stops costs 2 or 3); ``exists_one`` the predicate, 2 more when
  it holds; ``map`` 12 plus the transform; ``filter`` the predicate, 13 more when it holds; at the end 1
  (``exists_one`` 2).

Differences left (the table in ``test_dynamic_resources_cel.py`` was printed by cel-go v0.26 as
k8s.io/dynamic-resource-allocation v0.34 builds it): a call is charged before it runs, so one that alone
goes over the limit is not run; an index whose key is another attribute may cost 1 more; a call with an
error argument may cost 1 less; ``exists_one``, ``map`` and ``filter`` stop at the first element their
expression fails on (cel-go goes on, and fails at the end); a list of more than 1,000,000 elements is
over the limit when ``+`` would make it (cel-go concatenates lists in O(1) and charges only what reads
them; Python copies them: memory).

``Budget.deadline``: every ``CHECK_EVERY`` steps the evaluator looks at the clock and raises
``Interrupted`` past it, however little cost was counted: celpy takes microseconds per step, so the
deadline, not the cost, is what bounds the time a selector holds the scheduling loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lark

MAX_COST = 1_000_000
#: ``common.StringTraversalCostFactor``, ``common.RegexStringLengthCostFactor``
STRING_FACTOR, REGEX_FACTOR = 0.1, 0.25
LIST_CREATE, MAP_CREATE = 10, 30
#: steps between two looks at the clock
CHECK_EVERY = 64
_CONVERSIONS = frozenset({"int", "uint", "double", "bool", "string", "bytes", "dyn", "type"}) | {
    "duration",
    "timestamp",
}
_SCALED = frozenset({"lowerAscii", "upperAscii", "trim", "quantity", "isQuantity", "semver", "isSemver"})
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication"})
_PASS = _WRAPPERS | {"unary", "member"}


class CostExceeded(Exception):
    pass


class Interrupted(Exception):
    pass


class Budget:
    """What one evaluation may still spend: cost units, and time until ``deadline`` (0: none)."""

    __slots__ = ("deadline", "left", "ticks")

    def __init__(self, deadline: float = 0.0, limit: int | None = None) -> None:
        self.left = MAX_COST if limit is None else limit
        self.deadline, self.ticks = deadline, CHECK_EVERY

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise CostExceeded

    def tick(self) -> None:
        self.ticks = CHECK_EVERY
        if self.deadline and time.perf_counter() > self.deadline:
            raise Interrupted


# -- what the parse tree says once -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Facts:
    """Node ids (``id()`` of trees and tokens of one compiled expression) whose cost is not the usual."""

    #: list and map literals made of literals
    constants: frozenset[int]
    #: selections and indexes that start a relative attribute
    relative: frozenset[int]
    #: names of conversions of a literal
    folded: frozenset[int]
    #: ``x in [literals]``
    free_in: frozenset[int]
    #: ``map`` whose transform is a literal
    constant_maps: frozenset[int]
    #: per tree, the tree to evaluate for it and the method: a wrapper with one child (``expr`` down to
    #: ``member``) is its child, as celpy's method for it would return the child's value
    dispatch: dict[int, tuple[lark.Tree, str]]
    #: the value of each literal, once it was evaluated
    literals: dict[int, Any] = field(default_factory=dict)


def _unwrap(tree: Any) -> Any:
    """The expression under single-child wrappers and parentheses (which cel-go's parser drops)."""
    while isinstance(tree, lark.Tree):
        if tree.data in _WRAPPERS or tree.data in ("unary", "member"):
            if len(tree.children) != 1:
                return tree
            tree = tree.children[0]
        elif tree.data == "primary" and tree.children[0].data == "paren_expr":
            tree = tree.children[0].children[0]
        else:
            return tree
    return tree


def _constant(tree: Any, constants: set[int]) -> bool:
    primary = _unwrap(tree)
    if not isinstance(primary, lark.Tree) or primary.data != "primary":
        return False
    child = primary.children[0]
    return isinstance(child, lark.Tree) and (child.data == "literal" or id(child) in constants)


def facts_of(ast: lark.Tree) -> Facts:
    constants: set[int] = set()
    relative, folded, free_in, constant_maps = set(), set(), set(), set()
    for node in ast.iter_subtrees():  # children before their parents
        if node.data in ("list_lit", "map_lit"):
            items = node.children[0].children if node.children else []
            if all(_constant(item, constants) for item in items):
                constants.add(id(node))
        elif node.data in ("member_dot", "member_index"):
            base = _unwrap(node.children[0])
            variable = base.data == "primary" and base.children[0].data == "ident"
            if not variable and base.data not in ("member_dot", "member_index"):
                relative.add(id(node))
        elif node.data == "ident_arg" and len(node.children) == 2:
            name, args = node.children
            if str(name) in _CONVERSIONS and len(args.children) == 1 and _constant(args.children[0], set()):
                folded.add(id(name))
        elif node.data == "relation" and len(node.children) == 2 and node.children[0].data == "relation_in":
            right = _unwrap(node.children[1])
            if (
                right.data == "primary"
                and right.children[0].data == "list_lit"
                and _constant(right, constants)
            ):
                free_in.add(id(node))
        elif node.data == "member_dot_arg" and node.children[1] == "map" and len(node.children) == 3:
            args = node.children[2].children
            if len(args) == 2 and _constant(args[1], constants):
                constant_maps.add(id(node))  # ``[transform]`` is a constant: the step costs 2
    dispatch = {}
    for node in ast.iter_subtrees():
        target = node
        while target.data in _PASS and len(target.children) == 1:
            target = target.children[0]
        dispatch[id(node)] = (target, str(target.data))
    frozen = (frozenset(constants), frozenset(relative), frozenset(folded), frozenset(free_in))
    return Facts(*frozen, frozenset(constant_maps), dispatch)


# -- call costs --------------------------------------------------------------------------------------------
def _size(value: Any) -> int:
    """``actualSize``: the length of strings, bytes, lists and maps; 1 for anything else."""
    return len(value) if isinstance(value, (str, bytes, list, dict)) else 1


def _both(a: Any, b: Any) -> bool:
    return (isinstance(a, str) and isinstance(b, str)) or (isinstance(a, bytes) and isinstance(b, bytes))


def operator_cost(op: str, left: Any, right: Any) -> int:
    if op in ("_==_", "_!=_"):
        return math.ceil(min(_size(left), _size(right)) * STRING_FACTOR)
    if op in ("_<_", "_<=_", "_>_", "_>=_"):
        return math.ceil(min(len(left), len(right)) * STRING_FACTOR) if _both(left, right) else 1
    if op == "_+_":
        if _both(left, right):
            return math.ceil((len(left) + len(right)) * STRING_FACTOR)
        if isinstance(left, list) and isinstance(right, list) and len(left) + len(right) > MAX_COST:
            raise CostExceeded
        return 1
    if op == "_in_" and isinstance(right, list):
        return len(right)
    return 1


def call_cost(name: str, args: Sequence[Any]) -> int:
    """The cost of a function or method (the target first in ``args``)."""
    size = _size(args[0]) if args else 1
    if name in _SCALED or name in ("startsWith", "endsWith"):
        return math.ceil(size * STRING_FACTOR)
    if name in ("replace", "split"):
        return math.ceil(size * 2 * STRING_FACTOR)
    if name in ("indexOf", "lastIndexOf"):
        return int(size * STRING_FACTOR)  # ``traversalCost`` truncates
    if name == "contains" and len(args) == 2:
        return math.ceil(size * STRING_FACTOR) * math.ceil(_size(args[1]) * STRING_FACTOR)
    if name == "matches" and len(args) == 2:
        return math.ceil((1 + size) * STRING_FACTOR) * math.ceil(_size(args[1]) * REGEX_FACTOR)
    if name in ("string", "bytes") and args and isinstance(args[0], bytes if name == "string" else str):
        return math.ceil(size * STRING_FACTOR)  # ``BytesToString``, ``StringToBytes``
    return 1
