"""No module of ``fold/`` but those of ``fold/inputs/limits/`` writes a limit or the
bool-excluding type test itself, in any of the forms either can take (the step rule's comparison
of accepted against proposed has its guard in ``test_step_rule_guard.py``), and no reader words a
value of the wrong kind itself.

Each guard reads every module's syntax tree; planted sources, fed to the same checker, show it
finds each form it is meant to find: a limit as a power, a shift, a sum or difference of those,
a decimal, a hexadecimal or a float (``2.0**63``, ``9.2e18``), the platform's own word for one
(``sys.maxsize``, ``np.iinfo(...)``); the type test as ``isinstance(x, bool)`` or ``type(x) is
int``; a value held to a limit by hand (``lo <= x <= MAX``, against a limit or a name made from
one) or by a helper of its own (``is_between``). Planted sources show it passes over what is not
one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fold.inputs import limits

ROOT = Path(__file__).resolve().parent.parent


def modules_but_limits() -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fold").rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith("fold/inputs/limits/")
    ]


# -- the limits, written as constants ----------------------------------------------------------

LIMIT_VALUES = {
    65_536,  # 2^16, the most tokens one step may carry
    65_535,  # 2^16 - 1: ``x > 65535`` is the same cap
    9_223_372_036_854_775_808,  # 2^63
    9_223_372_036_854_775_807,  # 2^63 - 1, the largest count and duration
    18_446_744_073_709_551_616,  # 2^64
    18_446_744_073_709_551_615,  # 2^64 - 1, the largest request id
    -9_223_372_036_854_775_808,  # -(2^63)
}
"""The limits ``fold/inputs/limits/`` names, written out by hand; a copy of one anywhere else
is a second rule."""

NEAR = 0.03
"""A float within 3% of 2^63 or 2^64 is one of them rounded (``9.2e18``, ``1.8e19``): no other
figure of the fold comes near them."""

LIMIT_NAMES = {
    name for name, value in vars(limits).items() if name.isupper() and type(value) in (int, float)
}
"""The limits by name (``MAX_COUNT``, ``MAX_STEP_TOKENS``, ...), read from the module."""

_FOLDED = {ast.Pow, ast.LShift, ast.Sub, ast.Add}
_LARGEST_SHIFT = 256  # no limit needs more; a larger power or shift is left unevaluated
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_BETWEEN = re.compile(r"(^|_)(is|in|check|within)_(between|range|bounds)($|_)")
"""A helper's name that says it holds a value between two bounds."""


def constant_value(node: ast.AST) -> int | float | None:
    """The number a constant expression is (an integer or a float literal in any base; ``-x``,
    ``+x``; ``x ** y``, ``pow(x, y)``, ``x << y``, ``x - y``, ``x + y`` of such), else None."""
    if isinstance(node, ast.Call) and _called(node) == "pow" and len(node.args) == 2:
        node = ast.BinOp(node.args[0], ast.Pow(), node.args[1])
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) in (int, float) else None
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
        if not 0 <= right <= _LARGEST_SHIFT or type(right) is not int:
            return None
        if isinstance(node.op, ast.Pow):
            return left**right
        return left << right if type(left) is int else None
    return None


def _called(node: ast.Call) -> str | None:
    """The name a call calls (``pow``, ``math.pow``, ``np.greater``: its last part)."""
    func = node.func
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )


_ORDER_CALLS = {"greater", "greater_equal", "less", "less_equal", "gt", "ge", "lt", "le"}
"""numpy's and operator's order comparisons, written as calls."""


def _bit_width_test(node: ast.AST) -> bool:
    """``x.bit_length() > 63`` (or 64, either way round): the 64-bit limits by their width."""
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    return any(
        isinstance(side, ast.Call) and _called(side) == "bit_length" for side in sides
    ) and any(constant_value(side) in (63, 64) for side in sides)


def is_limit(value: int | float | None) -> bool:
    """A limit exactly, or (a float) 2^63 or 2^64 rounded."""
    if value is None:
        return False
    if value in LIMIT_VALUES:
        return True
    return type(value) is float and any(
        abs(value - limit) <= NEAR * abs(limit) for limit in LIMIT_VALUES if abs(limit) > 2**62
    )


def _platform_limit(node: ast.AST) -> bool:
    """``sys.maxsize`` and ``np.iinfo(...)`` (any module's ``iinfo``): the platform's 2^63 - 1."""
    if isinstance(node, ast.Attribute) and node.attr == "maxsize":
        return isinstance(node.value, ast.Name) and node.value.id == "sys"
    if isinstance(node, ast.Call):
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr == "iinfo") or (
            isinstance(func, ast.Name) and func.id == "iinfo"
        )
    if isinstance(node, ast.ImportFrom):
        names = {alias.name for alias in node.names}
        return (node.module == "sys" and "maxsize" in names) or "iinfo" in names
    return False


def _type_test(node: ast.AST) -> bool:
    """``isinstance(x, bool)``, or ``type(x) is int`` (``==``, ``is not``, ``in (int, ...)``,
    either way round, ``bool`` too): the tests that keep JSON's ``true`` from counting as 1."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return (
            node.func.id == "isinstance"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id == "bool"
        )
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]

    def type_of(side: ast.AST) -> bool:
        return (
            isinstance(side, ast.Call)
            and isinstance(side.func, ast.Name)
            and side.func.id == "type"
            and len(side.args) == 1
        )

    def int_or_bool(side: ast.AST) -> bool:
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        return any(isinstance(item, ast.Name) and item.id in ("int", "bool") for item in items)

    return any(type_of(side) for side in sides) and any(int_or_bool(side) for side in sides)


def _made_from_limits(tree: ast.AST) -> set[str]:
    """The limits' names and every name a module binds to an expression reading one (``_MAX =
    limits.MAX_COUNT // 10**9``), followed through chains."""
    names = set(LIMIT_NAMES)
    while True:
        before = len(names)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _reads_limit(node.value, names):
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if len(names) == before:
            return names


def _reads_limit(node: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(part, ast.Name) and part.id in names)
        or (isinstance(part, ast.Attribute) and part.attr in names)
        for part in ast.walk(node)
    )


def limit_copies(source: str) -> list[str]:
    """Where a module writes a limit (a constant expression that is one, ``is_limit``, the
    outermost such expression only, or the platform's word for one), the bool-excluding type
    test, or holds a value to a limit itself: an order comparison against a limit or a name
    made from one, or a helper named as a between-check."""
    found: list[str] = []
    tree = ast.parse(source)
    made = _made_from_limits(tree)

    def visit(node: ast.AST) -> None:
        if (isinstance(node, ast.expr) and is_limit(constant_value(node))) or _platform_limit(node):
            found.append(f"line {getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
            return  # the outermost expression that is a limit, not its parts too
        held = (
            isinstance(node, ast.Compare)
            and any(isinstance(op, _ORDER) for op in node.ops)
            and any(_reads_limit(side, made) for side in (node.left, *node.comparators))
        ) or (
            isinstance(node, ast.Call)
            and _called(node) in _ORDER_CALLS
            and any(_reads_limit(arg, made) for arg in node.args)
        )
        named = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and bool(
            _BETWEEN.search(node.name)
        )
        if held or _type_test(node) or _bit_width_test(node):
            found.append(f"line {getattr(node, 'lineno', 0)}: {ast.unparse(node)}")
        elif named:
            found.append(f"line {getattr(node, 'lineno', 0)}: def {getattr(node, 'name', '')}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_module_but_limits_writes_a_limit_or_the_bool_test():
    copies = {
        path.relative_to(ROOT).as_posix(): found
        for path in modules_but_limits()
        if (found := limit_copies(path.read_text()))
    }
    assert copies == {}
    # limits itself writes them: the checker reads it as it reads every other module
    assert len(limit_copies((ROOT / "fold" / "inputs" / "limits" / "values.py").read_text())) >= 4
    assert {"MAX_COUNT", "MAX_STEP_TOKENS", "MAX_STEP_NS", "MAX_REQUEST_ID"} <= LIMIT_NAMES
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
        # floats of the limits, exact or rounded
        "if value > 9.2e18:\n    pass\n",
        "TOP = 2.0**63\n",
        "TOP = 2.0 ** 64 - 1\n",
        "LOW = -9.22e18\n",
        "ID = 1.8e19\n",
        "CAP = 65536.0\n",
        "TOP = 9223372036854775807.0\n",
        # the platform's word for 2^63 - 1
        "if value > sys.maxsize:\n    pass\n",
        "from sys import maxsize\n",
        "TOP = np.iinfo(np.int64).max\n",
        "if value > numpy.iinfo('int64').max:\n    pass\n",
        "from numpy import iinfo\n",
        # the type test by the type's identity
        "ok = type(value) is int\n",
        "ok = type(value) == int\n",
        "if type(value) is not int:\n    pass\n",
        "ok = int is type(value)\n",
        "ok = type(value) in (int, float)\n",
        "if type(flag) is bool:\n    pass\n",
        # a value held to a limit by hand, or by a between-check of its own
        "if not 0 <= value <= limits.MAX_COUNT:\n    raise E\n",
        "ok = 1 <= run <= MAX_COUNT\n",
        "if seconds > limits.MAX_WINDOW_SECONDS:\n    pass\n",
        "TOP = (limits.MAX_COUNT - 10**6) / 1e9\nif secs > TOP:\n    pass\n",
        "LAST = limits.MAX_COUNT // 10**9\nSTOP = LAST - 1\nok = 0 <= t < STOP\n",
        "def is_between(low, value, high):\n    return low <= value <= high\n",
        "def _in_range(value):\n    return True\n",
        # the forms a cold review found the guard missed
        "TOP = pow(2, 63)\n",
        "TOP = math.pow(2, 64) - 1\n",
        "if value > 65535:\n    pass\n",
        "if value.bit_length() > 63:\n    pass\n",
        "ok = 64 >= n.bit_length()\n",
        "bad = np.greater(values, limits.MAX_COUNT)\n",
        "bad = operator.gt(value, MAX_STEP_TOKENS)\n",
    ],
)
def test_a_planted_limit_or_bool_test_is_found(source: str):
    assert len(limit_copies(source)) == 1, source


def test_what_is_not_a_limit_is_not_found():
    # a chunk of 64 KiB is not the step cap (a product is not folded), 2^62 is no limit, a
    # shift by a name is not a constant, and a tuple of scalar types is not the bool test;
    # floats far from every limit, another module's maxsize, the type of a value compared
    # with another type, a limit read but not compared with, a chain of plain numbers
    assert (
        limit_copies(
            "x = 2**10\ny = 64 * 1024\nz = isinstance(v, int)\nw = isinstance(v, (str, bool))\n"
            "u = 1 << 62\nt = 1 << n\n"
            "a = 1e9\nb = 65000.0\nc = 1e19\nd = 9e15\ne = 2.0**62\n"
            "f = cache.maxsize\ng = type(v) is str\nh = type(v).__name__\n"
            "i = limits.check_count(w, f, v, limits.COUNT_WORDS)\nj = 0 <= rate <= 1\n"
            "def between_requests(a):\n    return a\ndef in_orjson_int_ranges(a):\n    return a\n"
        )
        == []
    )


def test_the_folding_of_constants_is_the_definitions():
    """By hand: 1 << 63 is 2^63 = 9223372036854775808; 0x7F.. is 2^63 - 1; 2.0**63 the same
    as a float."""
    cases = {
        "1 << 63": 9_223_372_036_854_775_808,
        "(1 << 63) - 1": 9_223_372_036_854_775_807,
        "2 ** 64 - 1": 18_446_744_073_709_551_615,
        "0x7FFFFFFFFFFFFFFF": 9_223_372_036_854_775_807,
        "-(2 ** 3) + 1": -7,
        "2.0 ** 63": 9.223372036854775808e18,
        "1.5e3 - 500": 1000.0,
        "1 << 300": None,  # past the largest shift folded
        "2 * 8": None,  # a product is not folded
        "n << 3": None,
        "1.0 << 3": None,  # no shift of a float
    }
    for text, value in cases.items():
        assert constant_value(ast.parse(text, mode="eval").body) == value, text
    # rounded: within 3% of 2^63 or 2^64 (9.2e18 is 0.25% under 2^63), exact for 2^16
    assert [is_limit(v) for v in (9.2e18, 9.4e18, 1.8e19, 8.9e18, 65536.0, 65537.0, 1e19)] == [
        True, True, True, False, True, False, False,
    ]  # fmt: skip


# -- a value of the wrong kind, worded by a reader -----------------------------------------------

KIND_WORDING = re.compile(
    r"must be (an integer|a count|a string|a number|a non-negative integer)"
    r"|is not a (count|whole count|number|leg index)\b"
)
"""The wordings readers gave a value of the wrong kind before ``limits.WrongKind`` was the one:
``must be an integer, found str "4"``, ``is not a count``, ``is not a whole count``, ..."""


def kind_wordings(source: str) -> list[str]:
    """Each string constant (an f-string's parts too) that words a wrong kind by hand; a
    docstring is prose about the code, not a message, and is passed over."""
    tree = ast.parse(source)
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            match = KIND_WORDING.search(node.value)
            if match:
                found.append(f"{node.lineno}: {match.group(0)}")
    return found


def test_no_reader_words_a_value_of_the_wrong_kind_itself():
    """Every reader of another program's output (``fold/inputs/``) refuses a value of the wrong
    kind through ``limits`` (``integer``, ``count``, ``string``, ``finite_number``,
    ``decimal_count``, ``printed_number``: ``WrongKind``), so the words and the exit code are
    one. A command-line value (``--stall-factor``) is no reader's and has its own words."""
    found = [
        f"{path.relative_to(ROOT)}:{where}"
        for path in modules_but_limits()
        if path.relative_to(ROOT).as_posix().startswith("fold/inputs/")
        for where in kind_wordings(path.read_text())
    ]
    assert found == []


def test_the_wording_guard_finds_the_wordings_it_replaced():
    """Planted copies of the old readers' words are found; the one wording is not."""
    planted = (
        'raise InputError(f"{where}: {key} = {value!r} is not a count")\n'
        "raise _BadLine(f\"field 'v' must be an integer, found {shown}\")\n"
        'raise InputError(f"{where} = {value!r} is not a whole count")\n'
        'raise InputError(f"{where}: leg = {v} is not a leg index (0, 1, ...)")\n'
        'raise InputError(f"{place} must be a count (a non-negative integer)")\n'
        'raise InputError(f"{at} = {v} must be a number")\n'
    )
    assert [found.split(": ", 1)[0] for found in kind_wordings(planted)] == [
        "1", "2", "3", "4", "5", "6",
    ]  # fmt: skip
    assert kind_wordings('x = f"{field} {spelled} is not {wanted}"\ny = "is not an integer"') == []
    assert kind_wordings('def f():\n    """A value that is not a count is refused."""') == []


# -- a kind test followed by a refusal of the reader's own -------------------------------------

KIND_TESTS = {"isinstance", "is_int", "is_number", "is_finite_number", "is_count", "isfinite",
              "isnan"}  # fmt: skip
"""The calls that test a value's kind."""

OWN_REFUSALS_ALLOWED = {
    # the ledger's own files: a document or a folder that is not the ledger's is named as such
    ("fold/ledger/figures.py", "InputError"),
    ("fold/ledger/folder.py", "InputError"),
    # the sums file is the tool's own file too: metadata that is not its JSON object is named so
    ("fold/inputs/sums_file.py", "InputError"),
    # check_rates: the engine's own check on rates, worded as the engine's refusal (exit 1)
    ("fold/compare/matched.py", "RefusedError"),
    # a sum of well-formed durations past a double: the sum rule's, not a value's kind
    ("fold/inputs/oracles/llamacpp_simple.py", "InputError"),
    # the Python writer's API: a caller passing a str for an int is the caller's bug (TypeError,
    # ValueError), not an input of another program (docs/api.md)
    ("fold/inputs/steplog.py", "TypeError"),
    ("fold/inputs/steplog.py", "ValueError"),
}


def _name(node: ast.AST) -> str | None:
    node = node.func if isinstance(node, ast.Call) else node
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


def _tests_kind(test: ast.AST, flags: set[str]) -> bool:
    """Whether an ``if``'s test tests a value's kind: a kind call, ``type(x) is T``, or a name
    bound to one of those (``ok = isinstance(v, int)``; ``if not ok``)."""
    return any(
        (isinstance(n, ast.Call) and _name(n) in KIND_TESTS)
        or (isinstance(n, ast.Call) and _name(n) == "type" and len(n.args) == 1)
        or (isinstance(n, ast.Name) and n.id in flags)
        for n in ast.walk(test)
    )


def _is_kind_expression(node: ast.AST) -> bool:
    """A kind test as a whole (``isinstance(v, int)``, ``not is_int(v)``, ``a and b`` of
    those, ``type(v) is T``), not a value that merely uses one inside."""
    if isinstance(node, ast.UnaryOp):
        return _is_kind_expression(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(_is_kind_expression(value) for value in node.values)
    if isinstance(node, ast.Compare):
        return any(
            isinstance(side, ast.Call) and _name(side) == "type"
            for side in (node.left, *node.comparators)
        )
    return isinstance(node, ast.Call) and _name(node) in KIND_TESTS


def _own(statement: ast.stmt) -> bool:
    """A ``raise`` whose error ``limits`` did not make."""
    if not isinstance(statement, ast.Raise) or statement.exc is None:
        return False
    made = {_name(n) for n in ast.walk(statement.exc) if isinstance(n, ast.Call)}
    return not made & {"WrongKind", "OutOfRange", "kind_reason"}


_CONVERSIONS = {"int", "float", "Decimal"}
_CONVERSION_ERRORS = {"ValueError", "TypeError", "ArithmeticError"}


def own_kind_refusals(source: str) -> list[str]:
    """Each ``raise`` of an error ``limits`` did not make or word (``WrongKind``, ``OutOfRange``,
    ``kind_reason``) where a reader refuses a value for its kind, in any words: directly under
    an ``if`` that tests a value's kind, or in its ``else``; or in the ``except ValueError`` of
    a conversion (``int(text)``, ``float(text)``)."""
    tree = ast.parse(source)
    flags = {  # names bound to a kind test itself, not to a value chosen by one
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_kind_expression(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        branches: list[ast.stmt] = []
        if isinstance(node, ast.If) and _tests_kind(node.test, flags):
            branches = [*node.body, *node.orelse]
        elif isinstance(node, ast.Try) and any(
            isinstance(n, ast.Call) and _name(n) in _CONVERSIONS
            for statement in node.body
            for n in ast.walk(statement)
        ):
            branches = [
                statement
                for handler in node.handlers
                if handler.type is not None
                and {_name(n) for n in ast.walk(handler.type)} & _CONVERSION_ERRORS
                for statement in handler.body
            ]
        found += [(s.lineno, _name(s.exc)) for s in branches if _own(s)]  # type: ignore[union-attr,arg-type]
    return [f"{line}: {name}" for line, name in sorted(set(found))]


def test_no_reader_refuses_a_value_of_the_wrong_kind_in_its_own_words():
    """Structurally, not by phrase: a kind test whose refusal is not ``limits``' fails, so a
    reader cannot word a wrong kind itself in any words (the review planted
    ``raise InputError(f"... = {value!r} is wrong")`` under ``not isinstance(value, int)``)."""
    readers = [*(ROOT / "fold" / "inputs").rglob("*.py"), *(ROOT / "fold" / "ledger").rglob("*.py"),
               ROOT / "fold" / "folding" / "engine_trace_fold.py",
               ROOT / "fold" / "compare" / "matched.py"]  # fmt: skip
    found = {
        (path.relative_to(ROOT).as_posix(), where.split(": ")[1]): where
        for path in readers
        if "limits" not in path.parts
        for where in own_kind_refusals(path.read_text())
    }
    assert set(found) - OWN_REFUSALS_ALLOWED == set()
    assert set(found) >= OWN_REFUSALS_ALLOWED  # no stale entry


def test_the_kind_refusal_guard_finds_a_planted_refusal():
    planted = (
        "def f(value, where):\n"
        "    if not isinstance(value, int) or isinstance(value, float):\n"
        "        raise InputError(f'{where} = {value!r} is wrong')\n"
        "    if not is_number(value):\n"
        "        raise RefusedError('no')\n"
        "    if not is_int(value):\n"
        "        raise limits.WrongKind(where, 'x', value, 'an integer', 'fix')\n"
        "    if not isinstance(value, dict):\n"
        "        raise _BadLine(limits.WrongKind('w', '', value, 'an object', 'fix').reason)\n"
        "    if not isinstance(value, list):\n"
        "        raise _BadLine(limits.kind_reason('', value, 'a list'))\n"
    )
    assert own_kind_refusals(planted) == ["3: InputError", "5: RefusedError"]
    # the forms the second review planted past the first guard
    planted = (
        "def f(v, where, text):\n"
        "    if type(v) is str:\n"
        "        raise InputError(f'{where} = {v!r} is wrong')\n"
        "    if isinstance(v, int):\n"
        "        return v\n"
        "    else:\n"
        "        raise InputError(f'{where} = {v!r} is wrong')\n"
        "    try:\n"
        "        n = int(text)\n"
        "    except ValueError:\n"
        "        raise InputError(f'{where} = {text} is wrong') from None\n"
        "    ok = isinstance(v, int)\n"
        "    if not ok:\n"
        "        raise InputError(f'{where} = {v!r} is wrong')\n"
        "    try:\n"
        "        n = lookup(text)\n"
        "    except KeyError:\n"
        "        raise InputError('no such key')\n"
    )
    assert own_kind_refusals(planted) == [
        "3: InputError", "7: InputError", "11: InputError", "14: InputError",
    ]  # fmt: skip
