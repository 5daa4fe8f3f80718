"""No module of ``fold/`` but ``fold/inputs/limits.py`` writes a limit, the bool-excluding type
test, or the step rule's comparison of accepted against proposed itself.

Each guard reads every module's syntax tree; planted sources, fed to the same checker, show it
finds each form it is meant to find (a limit as a power, a shift, a sum or difference of
those, a decimal or a hexadecimal; the comparison under any name an accepted or a proposed
count was bound to), and passes over what is not one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fold.inputs import limits

ROOT = Path(__file__).resolve().parent.parent


def modules_but_limits() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fold").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "fold/inputs/limits.py"
    ]


# -- the limits, written as constants ----------------------------------------------------------

LIMIT_VALUES = {
    65_536,  # 2^16, the most tokens one step may carry
    9_223_372_036_854_775_808,  # 2^63
    9_223_372_036_854_775_807,  # 2^63 - 1, the largest count and duration
    18_446_744_073_709_551_616,  # 2^64
    18_446_744_073_709_551_615,  # 2^64 - 1, the largest request id
    -9_223_372_036_854_775_808,  # -(2^63)
}
"""The limits ``fold/inputs/limits.py`` names, written out by hand; a copy of one anywhere else
is a second rule."""

_FOLDED = {ast.Pow, ast.LShift, ast.Sub, ast.Add}
_LARGEST_SHIFT = 256  # no limit needs more; a larger power or shift is left unevaluated


def constant_value(node: ast.AST) -> int | None:
    """The integer a constant expression is (an integer literal in any base; ``-x``, ``+x``;
    ``x ** y``, ``x << y``, ``x - y``, ``x + y`` of such), else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = constant_value(node.operand)
        if operand is None:
            return None
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLDED:
        left, right = constant_value(node.left), constant_value(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if not 0 <= right <= _LARGEST_SHIFT:
            return None
        return left**right if isinstance(node.op, ast.Pow) else left << right
    return None


def limit_copies(source: str) -> list[str]:
    """Where a module writes a limit (a constant expression equal to one of ``LIMIT_VALUES``,
    the outermost such expression only) or ``isinstance(x, bool)`` (the test that keeps JSON's
    ``true`` from counting as 1)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.expr) and constant_value(node) in LIMIT_VALUES:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
            return  # the outermost expression that is a limit, not its parts too
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id == "bool"
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def test_no_module_but_limits_writes_a_limit_or_the_bool_test():
    copies = {
        path.relative_to(ROOT).as_posix(): found
        for path in modules_but_limits()
        if (found := limit_copies(path.read_text()))
    }
    assert copies == {}
    # limits.py itself writes them: the checker reads it as it reads every other module
    assert len(limit_copies((ROOT / "fold" / "inputs" / "limits.py").read_text())) >= 4
    assert [limits.is_int(v) for v in (0, 2**80, -1, True, 1.0, "1")] == [
        True, True, True, False, False, False,
    ]  # fmt: skip
    assert [limits.is_number(v) for v in (0, 1.5, float("inf"), True, "1", None)] == [
        True, True, True, False, False, False,
    ]  # fmt: skip


@pytest.mark.parametrize(
    "source",
    [
        "if abs(value) >= 2**63:\n    pass\n",
        "LIMIT = 2 ** 64 - 1\n",
        "CAP = 65536\n",
        "MAX = 9223372036854775807\n",
        "TOP = 18446744073709551615\n",
        "TOO_FAR = 18446744073709551616\n",
        "MAX = 0x7FFFFFFFFFFFFFFF\n",
        "MAX = 0xffff_ffff_ffff_ffff\n",
        "SIGN = 0x8000000000000000\n",
        "if value >= 1 << 63:\n    pass\n",
        "MAX = (1 << 63) - 1\n",
        "if value > (1<<64) - 1:\n    pass\n",
        "TOP = 1<<64\n",
        "CAP = 1 << 16\n",
        "MAX = 2**62 + 2**62 - 1\n",
        "LOW = -(2**63)\n",
        "LOW = -1 << 63\n",
        "ok = f(x, limit=2 ** 63)\n",
        "ok = isinstance(value, int) and not isinstance(value, bool)\n",
        "if isinstance(flag, bool):\n    pass\n",
    ],
)
def test_a_planted_limit_or_bool_test_is_found(source: str):
    assert len(limit_copies(source)) == 1, source


def test_what_is_not_a_limit_is_not_found():
    # a chunk of 64 KiB is not the step cap (a product is not folded), 2^62 is no limit, a
    # shift by a name is not a constant, and a tuple of scalar types is not the bool test
    assert (
        limit_copies(
            "x = 2**10\ny = 64 * 1024\nz = isinstance(v, int)\nw = isinstance(v, (str, bool))\n"
            "u = 1 << 62\nt = 1 << n\n"
        )
        == []
    )


def test_the_folding_of_constants_is_the_definitions():
    """By hand: 1 << 63 is 2^63 = 9223372036854775808; 0x7F.. is 2^63 - 1."""
    cases = {
        "1 << 63": 9_223_372_036_854_775_808,
        "(1 << 63) - 1": 9_223_372_036_854_775_807,
        "2 ** 64 - 1": 18_446_744_073_709_551_615,
        "0x7FFFFFFFFFFFFFFF": 9_223_372_036_854_775_807,
        "-(2 ** 3) + 1": -7,
        "1 << 300": None,  # past the largest shift folded
        "2 * 8": None,  # a product is not folded
        "n << 3": None,
    }
    for text, value in cases.items():
        assert constant_value(ast.parse(text, mode="eval").body) == value, text


# -- the step rule's comparison, accepted against proposed -------------------------------------

_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _named(text: str) -> str | None:
    """Which count a name, an attribute or a string key means by its words: one holding
    "accept" reads A (``num_accepted_draft_tokens`` too), else one holding "propos" or "draft"
    reads P."""
    lowered = text.lower()
    if "accept" in lowered:
        return "A"
    if "propos" in lowered or "draft" in lowered:
        return "P"
    return None


def _reads(node: ast.AST, bound: dict[str, str]) -> set[str]:
    """Which of A and P an expression reads: a name bound to one of them (``bound``) reads it,
    whatever the name; any other name, attribute or string constant by its words."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and part.id in bound:
            found.add(bound[part.id])
            continue
        text = (
            part.id if isinstance(part, ast.Name)
            else part.attr if isinstance(part, ast.Attribute)
            else part.value if isinstance(part, ast.Constant) and isinstance(part.value, str)
            else ""
        )  # fmt: skip
        if (count := _named(text)) is not None:
            found.add(count)
    return found


def _bind(target: ast.AST, value: ast.AST | None, bound: dict[str, str], *, each: bool) -> None:
    """Bind the names of ``target`` to what ``value`` reads: pairwise for a tuple of a tuple
    (or, iterating, of ``zip(...)``, through ``enumerate(...)``), whole for a name. ``each``:
    the target takes each item of ``value``, not ``value`` itself."""
    if value is None:
        return
    if each and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if value.func.id == "enumerate" and value.args and isinstance(target, ast.Tuple):
            if len(target.elts) == 2:
                _bind(target.elts[1], value.args[0], bound, each=True)
            return
        if value.func.id == "zip" and isinstance(target, ast.Tuple):
            if len(target.elts) == len(value.args):
                for part, source in zip(target.elts, value.args, strict=True):
                    _bind(part, source, bound, each=True)
            return
    if each and isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        # the target takes each item in turn: a name is bound only where every item agrees
        takes = []
        for item in value.elts:
            one = dict(bound)
            _bind(target, item, one, each=False)
            takes.append(one)
        for name in {name for one in takes for name in one}:
            if name not in bound and len({one.get(name) for one in takes}) == 1:
                bound[name] = takes[0][name]
        return
    if isinstance(target, ast.Tuple) and isinstance(value, (ast.GeneratorExp, ast.ListComp)):
        # ``a, p = (read(x) for x in ("accepted", "proposed"))``: item i of a literal the
        # generator iterates (alone or zipped) is what names target i
        _bind_generated(target, value, bound)
        return
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        if len(target.elts) == len(value.elts):
            for part, source in zip(target.elts, value.elts, strict=True):
                _bind(part, source, bound, each=each)
        return
    if isinstance(target, ast.Name):
        reads = _reads(value, {k: v for k, v in bound.items() if k != target.id})
        if len(reads) == 1:
            bound[target.id] = next(iter(reads))


def _bind_generated(
    target: ast.Tuple, value: ast.GeneratorExp | ast.ListComp, bound: dict[str, str]
) -> None:
    if len(value.generators) != 1:
        return
    iterated = value.generators[0].iter
    literals = (
        [iterated]
        if isinstance(iterated, (ast.Tuple, ast.List))
        else [arg for arg in iterated.args if isinstance(arg, (ast.Tuple, ast.List))]
        if isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Name)
        and iterated.func.id == "zip"
        else []
    )
    for place, part in enumerate(target.elts):
        reads = set().union(
            *(
                _reads(lit.elts[place], bound)
                for lit in literals
                if len(lit.elts) == len(target.elts)
            )
        )
        if isinstance(part, ast.Name) and len(reads) == 1:
            bound[part.id] = next(iter(reads))


def _bindings(scope: ast.AST) -> dict[str, str]:
    """The names a scope binds to A or P: by assignment, and as loop or comprehension targets,
    followed through chains (``a = accepted``, ``x = a``) until nothing changes."""
    bound: dict[str, str] = {}
    while True:
        before = dict(bound)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind(target, node.value, bound, each=False)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
                _bind(node.target, node.value, bound, each=False)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                _bind(node.target, node.iter, bound, each=True)
        if bound == before:
            return bound


def step_rule_copies(source: str) -> list[str]:
    """Where a module orders accepted against proposed itself (``accepted > proposed``,
    ``pl.col("accepted") > pl.col("proposed")``, ``0 <= a <= p``): one operand reading only A,
    another only P, by their words or by what their names were bound to in the scope."""
    found = {}
    for scope in ast.walk(ast.parse(source)):
        if not isinstance(scope, _SCOPES):
            continue
        bound = _bindings(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Compare) and any(isinstance(op, _ORDER) for op in node.ops):
                sides = [_reads(side, bound) for side in (node.left, *node.comparators)]
                if {"A"} in sides and {"P"} in sides:
                    found[(node.lineno, node.col_offset)] = ast.unparse(node)
    return [f"line {line}: {text}" for (line, _), text in sorted(found.items())]


def test_no_module_but_limits_orders_accepted_against_proposed():
    copies = {
        path.relative_to(ROOT).as_posix(): found
        for path in modules_but_limits()
        if (found := step_rule_copies(path.read_text()))
    }
    assert copies == {}
    # the one comparison is in limits.py (accepted_above_proposed), which the checker finds
    in_limits = step_rule_copies((ROOT / "fold" / "inputs" / "limits.py").read_text())
    assert [found.split(": ", 1)[1] for found in in_limits] == ["accepted > proposed"]


@pytest.mark.parametrize(
    "source",
    [
        "if accepted > proposed:\n    pass\n",
        "bad = pl.col('accepted') > pl.col('proposed')\n",
        "ok = 0 <= row['accepted'] <= row['proposed']\n",
        "if low('accepted', accepted) > high('proposed', proposed):\n    pass\n",
        "if counts.num_accepted_draft_tokens > counts.num_draft_tokens:\n    pass\n",
        "if proposed < accepted:\n    pass\n",
        # other names, bound to the counts
        "p = count(timings.get('draft_n'), 'draft_n')\n"
        "a = count(timings.get('draft_n_accepted'), 'draft_n_accepted')\n"
        "if a > p:\n    raise E\n",
        "def f(drafted, accepted):\n"
        "    for i, (p, a) in enumerate(zip(drafted, accepted, strict=True)):\n"
        "        if a > p:\n            raise E\n",
        "x, y = n_accept, n_drafted\nif x > y:\n    pass\n",
        "def f(rows):\n    a = rows['accepted']\n    top = a\n    return top >= rows.proposed\n",
        "bad = [i for i, (d, a) in enumerate(zip(drafts, accepts)) if a > d]\n",
        "for a in accepted_counts:\n    if a > total_proposed:\n        pass\n",
        "if (a := step.accepted) > step.proposed:\n    pass\n",
        "a, p = (count(m[g], f) for g, f in zip(groups, ('accepted (A)', 'drafts (P)')))\n"
        "if a > p:\n    pass\n",
        "for a, p in ((s.n_accepted, s.n_drafted), (t.accepted, t.proposed)):\n    bad = a > p\n",
    ],
)
def test_a_planted_step_rule_is_found(source: str):
    assert len(step_rule_copies(source)) == 1, source


def test_what_orders_no_accepted_against_proposed_is_not_found():
    # a length check, a key test, a rate against a number, two durations, A against A, a
    # name bound to both (a ratio), names bound in another function, a name bound to A
    # against a plain number
    assert (
        step_rule_copies(
            "a = len(drafted) != len(accepted)\nb = 'draft_n_accepted' in timings\n"
            "c = accept_rate > 0.5\nd = draft_ns < verify_ns\ne = accepted > accepted_before\n"
            "r = accepted / proposed\nif r > 1:\n    pass\n"
            "def f():\n    a = accepted\ndef g(a, p):\n    return a > p\n"
            "def h():\n    a = accepted\n    return a > 3\n"
            "for key, v in (('steps', steps), ('proposed', proposed)):\n    w = v <= slack[key]\n"
        )
        == []
    )
