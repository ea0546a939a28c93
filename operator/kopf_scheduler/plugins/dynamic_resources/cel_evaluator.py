"""celpy's evaluator made to count upstream's cost (``cel_cost``) as it goes and to stop at a deadline.

Besides charging, it evaluates as cel-go does where that changes the cost: ``&&`` and ``||`` stop at the
first side that decides them, ``all`` and ``exists`` at the first element that decides them (celpy
evaluates everything), and the macros follow cel-go's expansion into comprehensions. To be quicker it
goes from a single-child node straight to the node under it (``Facts.dispatch``) and parses each literal
once; what celpy's own methods do is otherwise unchanged.
"""

from __future__ import annotations

from typing import Any

import lark
from celpy import CELEvalError, celtypes
from celpy.evaluation import Activation, Evaluator

from kopf_scheduler.plugins.dynamic_resources.cel_cost import (
    LIST_CREATE,
    MAP_CREATE,
    Budget,
    Facts,
    call_cost,
    operator_cost,
)

_OPERATORS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "_in_",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
    "unary_not": "!_",
    "unary_neg": "-_",
}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


class CostEvaluator(Evaluator):
    """celpy's evaluator charging upstream's units to a ``Budget`` and looking at its deadline."""

    def __init__(self, ast: lark.Tree, activation: Activation, budget: Budget, facts: Facts) -> None:
        super().__init__(ast, activation)
        self.budget, self.facts = budget, facts

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return CostEvaluator(ast, self.activation, self.budget, self.facts)

    def _visit_tree(self, tree: lark.Tree) -> Any:
        budget = self.budget
        budget.ticks -= 1
        if budget.ticks <= 0:
            budget.tick()
        found = self.facts.dispatch.get(id(tree))
        if found is None:  # a tree celpy made while evaluating
            return super()._visit_tree(tree)
        return getattr(self, found[1])(found[0])

    def literal(self, tree: lark.Tree) -> Any:
        found = self.facts.literals.get(id(tree), self)
        if found is self:  # parsed once: celpy unescapes a string literal on every visit
            found = self.facts.literals[id(tree)] = super().literal(tree)
        return found

    def primary(self, tree: lark.Tree) -> Any:
        child = tree.children[0]
        kind = child.data
        if kind == "ident":
            self.budget.charge(1)
        elif kind == "list_lit" and id(child) not in self.facts.constants:
            self.budget.charge(LIST_CREATE)
        elif kind == "map_lit" and id(child) not in self.facts.constants:
            self.budget.charge(MAP_CREATE)
        elif (
            kind == "ident_arg"
            and child.children[0] == "dyn"
            and id(child.children[0]) not in self.facts.folded
        ):
            self.budget.charge(1)
        return super().primary(tree)

    def macro_has_eval(self, exprlist: lark.Tree) -> celtypes.BoolType:
        found = super().macro_has_eval(exprlist)
        self.budget.left += 1  # the field is tested, not selected
        return found

    def member_dot(self, tree: lark.Tree) -> Any:
        self.budget.charge(2 if id(tree) in self.facts.relative else 1)
        return super().member_dot(tree)

    def member_index(self, tree: lark.Tree) -> Any:
        self.budget.charge(2 if id(tree) in self.facts.relative else 1)
        return super().member_index(tree)

    def function_eval(self, name_token: lark.Token, exprlist: Any = None) -> Any:
        if id(name_token) not in self.facts.folded:
            args = [] if exprlist is None or isinstance(exprlist, CELEvalError) else list(exprlist)
            self.budget.charge(call_cost(name_token.value, args))
        return super().function_eval(name_token, exprlist)

    def method_eval(self, object: Any, method_ident: lark.Token, exprlist: Any = None) -> Any:
        rest = [] if exprlist is None or isinstance(exprlist, CELEvalError) else list(exprlist)
        self.budget.charge(call_cost(method_ident.value, [object, *rest]))
        return super().method_eval(object, method_ident, exprlist)

    # -- operators: charged, and ``&&``/``||`` decided by the first side that decides, as cel-go's -------
    def conditionalor(self, tree: lark.Tree) -> Any:
        return self._logical(tree, True) if len(tree.children) == 2 else super().conditionalor(tree)

    def conditionaland(self, tree: lark.Tree) -> Any:
        return self._logical(tree, False) if len(tree.children) == 2 else super().conditionaland(tree)

    def _logical(self, tree: lark.Tree, decides: bool) -> Any:
        left = self.visit(tree.children[0])
        if isinstance(left, celtypes.BoolType) and bool(left) is decides:
            return left
        right = self.visit(tree.children[1])
        return self._apply(tree, "_||_" if decides else "_&&_", left, right)

    def relation(self, tree: lark.Tree) -> Any:
        return self._binary(tree) if len(tree.children) == 2 else super().relation(tree)

    def addition(self, tree: lark.Tree) -> Any:
        return self._binary(tree) if len(tree.children) == 2 else super().addition(tree)

    def multiplication(self, tree: lark.Tree) -> Any:
        return self._binary(tree) if len(tree.children) == 2 else super().multiplication(tree)

    def unary(self, tree: lark.Tree) -> Any:
        if len(tree.children) != 2:
            return super().unary(tree)
        _, operand = self.visit_children(tree)
        self.budget.charge(1)
        return self._apply(tree, _OPERATORS[tree.children[0].data], operand)

    def _binary(self, tree: lark.Tree) -> Any:
        op = _OPERATORS[tree.children[0].data]
        values: list[Any] = self.visit_children(tree)
        (left, *_), right = values
        if id(tree) not in self.facts.free_in:
            self.budget.charge(operator_cost(op, left, right))
        return self._apply(tree, op, left, right)

    def _apply(self, tree: lark.Tree, op: str, *args: Any) -> Any:
        """celpy's operator call and its error values."""
        try:
            return self.activation.resolve_function(op)(*args)
        except TypeError as e:
            return CELEvalError(f"found no matching overload for {op}", e.__class__, e.args, tree=tree)
        except ZeroDivisionError as e:
            return CELEvalError("modulus or divide by zero", e.__class__, e.args, tree=tree)
        except (ValueError, OverflowError) as e:
            return CELEvalError("return error for overflow", e.__class__, e.args, tree=tree)

    # -- macros: cel-go's comprehensions -----------------------------------------------------------------
    def member_dot_arg(self, tree: lark.Tree) -> Any:
        name = str(tree.children[1])
        if name in _MACROS and len(tree.children) == 3 and len(tree.children[2].children) == 2:
            return self._comprehension(tree, name)
        return super().member_dot_arg(tree)

    def _comprehension(self, tree: lark.Tree, name: str) -> Any:
        target = self.visit(tree.children[0])
        if isinstance(target, CELEvalError):
            return target
        var_tree, expr_tree = tree.children[2].children
        var = str(next(var_tree.find_data("ident")).children[0])
        nested = self.sub_evaluator(expr_tree)
        charge = self.budget.charge
        if name in ("all", "exists"):
            decided = name == "exists"  # the value that ends the loop
            result: Any = celtypes.BoolType(not decided)
            for item in target:
                charge(3 if decided else 2)  # the loop condition
                if isinstance(result, celtypes.BoolType) and bool(result) is decided:
                    break
                charge(1)
                value: Any
                try:
                    value = nested.evaluate({var: item})
                except CELEvalError as e:
                    value = e
                result = self._apply(tree, "_||_" if decided else "_&&_", result, value)
            charge(1)
            return result
        if name == "exists_one":
            count = 0
            for item in target:
                if nested.evaluate({var: item}):
                    charge(2)
                    count += 1
            charge(2)
            return celtypes.BoolType(count == 1)
        values = []
        for item in target:
            if name == "map":
                charge(2 if id(tree) in self.facts.constant_maps else 12)
                values.append(nested.evaluate({var: item}))
            elif nested.evaluate({var: item}):
                charge(13)
                values.append(item)
        charge(1)
        return celtypes.ListType(values)
