"""No module of ``fold/`` but those of ``fold/inputs/limits/`` writes the step rule's comparison of
accepted against proposed itself (``limits.accepted_above_proposed``).

The guard reads every module's syntax tree; planted sources, fed to the same checker, show it
finds the comparison under any name an accepted or a proposed count was bound to, and as the
sign of their difference (``proposed - accepted < 0``, or a name bound to that difference), and
passes over what is not one.
"""

from __future__ import annotations

import ast

import pytest
from test_limit_guards import ROOT, modules_but_limits

_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
DIFFERENCE = "P - A"
"""What a name bound to ``proposed - accepted`` (either way round) reads: its sign is the rule."""
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


def _difference(node: ast.AST, bound: dict[str, str]) -> bool:
    """``proposed - accepted`` or ``accepted - proposed``: one side reading only A, the other
    only P (by words or by what their names were bound to)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return False
    sides = {frozenset(_reads(node.left, bound)), frozenset(_reads(node.right, bound))}
    return sides == {frozenset({"A"}), frozenset({"P"})}


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
        others = {k: v for k, v in bound.items() if k != target.id}
        reads = _reads(value, others)
        if len(reads) == 1:
            bound[target.id] = next(iter(reads))
        elif _difference(value, others):
            bound[target.id] = DIFFERENCE


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
    another only P, by their words or by what their names were bound to in the scope; or an
    operand that is their difference (``proposed - accepted < 0``, ``d = p - a; d < 0``)."""
    found = {}
    for scope in ast.walk(ast.parse(source)):
        if not isinstance(scope, _SCOPES):
            continue
        bound = _bindings(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Compare) and any(isinstance(op, _ORDER) for op in node.ops):
                operands = (node.left, *node.comparators)
                sides = [_reads(side, bound) for side in operands]
                signed = any(
                    _difference(side, bound) or _reads(side, bound) == {DIFFERENCE}
                    for side in operands
                )
                if ({"A"} in sides and {"P"} in sides) or signed:
                    found[(node.lineno, node.col_offset)] = ast.unparse(node)
    return [f"line {line}: {text}" for (line, _), text in sorted(found.items())]


def test_no_module_but_limits_orders_accepted_against_proposed():
    copies = {
        path.relative_to(ROOT).as_posix(): found
        for path in modules_but_limits()
        if (found := step_rule_copies(path.read_text()))
    }
    assert copies == {}
    # the one comparison is in limits (accepted_above_proposed), which the checker finds
    in_limits = step_rule_copies((ROOT / "fold" / "inputs" / "limits" / "steps.py").read_text())
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
        # the rule as the sign of the difference
        "if proposed - accepted < 0:\n    pass\n",
        "bad = accepted - proposed > 0\n",
        "if 0 > row['proposed'] - row['accepted']:\n    pass\n",
        "bad = pl.col('proposed') - pl.col('accepted') < 0\n",
        "p, a = step.drafted, step.accepted\nif p - a < 0:\n    pass\n",
        "left = proposed - accepted\nif left < 0:\n    raise E\n",
        "def f(s):\n    rejected = s.proposed - s.accepted\n    return rejected >= 0\n",
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
            "rejected = proposed - accepted\ntotal = rejected + accepted\n"
            "gap = draft_ns - verify_ns\nif gap < 0:\n    pass\n"
            "m = accepted - accepted_before\nif m > 0:\n    pass\n"
        )
        == []
    )
