"""Where a module works a number out, read from its syntax tree: the check that holds the
presenters to reading their figures (``tests/test_presenters_compute.py`` for all of
``fold/present/``, ``tests/test_ledger_presenters.py`` for the ledger's three).

A computation is arithmetic (``+ - * / // % **``), a negated name, an ordering comparison
(``< <= > >=``), an augmented assignment, a call that counts, orders or sums (``sum``, ``len``,
``abs``, ``min``, ``max``, ``round``, ``pow``, ``divmod``, ``sorted``, ``reduce``, ``Counter``,
whatever module they are reached through: ``builtins.sum`` as well), a method that counts or
orders in place (``.count(...)``, ``.sort(...)``), a dunder called by name (``x.__truediv__(y)``
is ``x / y``), a call of a numeric module (``math``, ``statistics``, ``numpy`` as ``np``,
``polars`` as ``pl``, ``operator``, ``functools``, ...) and an import of one (or of
``collections.Counter``). Not a computation, whatever the names hold: text
joined to text (a literal, an f-string, a string method's result, a rich ``Text``), and a list
or tuple display joined to or repeated into another (``[""] * n`` is flagged for its ``n``
only when ``n`` is worked out: ``len(headers)`` is a count).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

COUNTING = {
    "sum", "len", "abs", "min", "max", "round", "pow", "divmod", "sorted", "reduce", "Counter",
}  # fmt: skip
"""Called by name, however it came in (``builtins.sum`` is caught as a numeric module's call)."""
IN_PLACE = {"count", "sort"}
"""Methods that count or order the object they are called on: ``rows.count(x)``, ``.sort(...)``."""
NUMERIC = {
    "math", "statistics", "numpy", "np", "polars", "pl", "operator", "functools", "itertools",
    "fractions", "decimal", "heapq", "bisect", "scipy", "pandas", "builtins",
}  # fmt: skip
"""Modules (and their usual short names) whose calls and imports work numbers out: a presenter
has no business with any of them (``builtins`` because ``builtins.sum`` is ``sum``)."""
COUNTING_IMPORTS = {("collections", "Counter")}
"""A name that counts, imported from a module that is otherwise fine (``collections.abc``)."""
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
TEXT_METHODS = {"join", "replace", "format", "upper", "strip", "rstrip", "removesuffix"}
TEXT_CALLS = {"Text", "str"}
SEQUENCES = (ast.List, ast.Tuple, ast.ListComp)


def is_text(node: ast.expr) -> bool:
    """Plainly text whatever its names hold: a literal, an f-string, a string method's result,
    a rich ``Text`` (or ``str``) made, text joined to text, or a choice between texts."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in TEXT_METHODS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in TEXT_CALLS
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return is_text(node.left) or is_text(node.right)
    if isinstance(node, ast.IfExp):
        return is_text(node.body) and is_text(node.orelse)
    return False


def is_sequence(node: ast.expr) -> bool:
    """A list or tuple display, or one joined to another."""
    if isinstance(node, SEQUENCES):
        return True
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and (is_sequence(node.left) or is_sequence(node.right))
    )


@dataclass(frozen=True)
class Place:
    """One computation: the function it stands in (dotted, ``<module>`` at the top), its line
    and its source text."""

    function: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"line {self.line} in {self.function}: {self.text}"


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[Place] = []

    def _add(self, node: ast.AST, text: str | None = None) -> None:
        where = ".".join(self.scope) or "<module>"
        self.found.append(Place(where, getattr(node, "lineno", 0), text or ast.unparse(node)))

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ARITHMETIC) and not (is_text(node.left) or is_text(node.right)):
            if is_sequence(node.left) or is_sequence(node.right):
                pass  # a display joined or repeated: its parts are still looked at below
            else:
                self._add(node)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant):
            self._add(node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, ORDERING) for op in node.ops):
            self._add(node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not (is_text(node.value) or is_sequence(node.value)):
            self._add(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            computes = func.id in COUNTING
        elif isinstance(func, ast.Attribute):
            computes = (
                func.attr in IN_PLACE
                or (func.attr.startswith("__") and func.attr.endswith("__"))
                or (isinstance(func.value, ast.Name) and func.value.id in NUMERIC)
            )
        else:
            computes = False
        if computes:
            self._add(node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in NUMERIC:
                self._add(node, f"imports {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module.split(".")[0] in NUMERIC:
            self._add(node, f"imports {module}")
            return
        for alias in node.names:
            if (module, alias.name) in COUNTING_IMPORTS:
                self._add(node, f"imports {module}.{alias.name}")


def places(source: str) -> list[Place]:
    """Each place ``source`` works a number out, in the order of its syntax tree."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    return finder.found


def computations(source: str) -> list[str]:
    """The same places as text: 'line 12 in shown: 100 * value'."""
    return [str(place) for place in places(source)]
