"""A safe arithmetic evaluator for composite formulas: an AST whitelist, never eval()."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "sqrt": math.sqrt,
    "clip": lambda x, low=0.0, high=1.0: min(max(x, low), high),
    # The rest of the functions OpenAI's multi grader allows in calculate_output, so an imported one runs here.
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "log": math.log,
}
MAX_FORMULA_CHARS = 500
MAX_EXPONENT = 16  # 10 ** 10 ** 10 would take the process's memory


class FormulaError(ValueError):
    """The formula is not allowed or cannot be computed; the message says what part."""


def check_formula(text: str, *, names: set[str]) -> ast.Expression:
    """The parsed formula; FormulaError naming the first construct that is not arithmetic over `names`."""
    if len(text) > MAX_FORMULA_CHARS:
        raise FormulaError(f"is longer than {MAX_FORMULA_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"is not a valid expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id not in names and node.id not in FUNCTIONS:
                raise FormulaError(f"uses {node.id!r}, which is not a part name ({', '.join(sorted(names))})")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise FormulaError(f"may call only {', '.join(FUNCTIONS)} (positional arguments)")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise FormulaError(f"may hold only numbers, not {node.value!r}")
        elif isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare | ast.IfExp):
            op = getattr(node, "op", None)
            if isinstance(node, ast.BinOp) and type(op) not in _BINARY:
                raise FormulaError(f"may not use the operator {type(op).__name__}")
            if isinstance(node, ast.UnaryOp) and type(op) not in _UNARY:
                raise FormulaError(f"may not use the operator {type(op).__name__}")
            if isinstance(node, ast.Compare) and not all(type(o) in _COMPARE for o in node.ops):
                raise FormulaError("may compare only with < <= > >= == !=")
        elif not isinstance(
            node, ast.Expression | ast.Load | ast.operator | ast.unaryop | ast.cmpop | ast.boolop
        ):
            raise FormulaError(f"may not contain {type(node).__name__} (only arithmetic over the parts)")
    return tree


def evaluate(tree: ast.Expression, values: dict[str, float]) -> float:
    """The formula's value; FormulaError for a division by zero, an overflow or a non-number."""
    try:
        result = _eval(tree.body, values)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
        raise FormulaError(f"could not be computed: {exc}") from None
    if isinstance(result, bool):
        return float(result)
    if not isinstance(result, int | float) or not math.isfinite(result):
        raise FormulaError(f"gave {result!r}, not a finite number")
    return float(result)


def _eval(node: ast.AST, values: dict[str, float]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is over {MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.BoolOp):
        items = [_eval(value, values) for value in node.values]
        return float(all(items) if isinstance(node.op, ast.And) else any(items))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, values)
            if not _COMPARE[type(op)](left, right):
                return 0.0
            left = right
        return 1.0
    if isinstance(node, ast.IfExp):
        return _eval(node.body, values) if _eval(node.test, values) else _eval(node.orelse, values)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # check_formula lets through calls of named functions only
        return FUNCTIONS[node.func.id](*[_eval(arg, values) for arg in node.args])
    raise ValueError(f"unsupported {type(node).__name__}")
