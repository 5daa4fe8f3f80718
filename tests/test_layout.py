"""The package's stages and the one way data flows through them (``docs/code.md``).

Every module of ``fold/`` is parsed (never imported) and each import is judged by the stages:
a module imports only from its own stage or an earlier one, never an entry point, and never a
name another module keeps private (a leading underscore). The imports, wherever they stand (at
the top, inside a function, under ``if TYPE_CHECKING:``), make a graph that has no cycle; and
no module is longer than a module should be. One name means one thing: no two classes share a
name. Files are read in inputs (every outside format) and the ledger (its own files) only,
with the exceptions named in ``READ_EXCEPTIONS``, each an exact call with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fold"

STAGES = {"inputs": 1, "folding": 2, "compare": 3, "present": 4, "ledger": 5}
SHARED = {"fold.errors", "fold.wording", "fold._native"}
"""Imported by every stage: the errors, the wording of numbers in messages, and the native
extension (C++, it imports nothing of ours)."""
ENTRY = 6
"""The top of ``fold/`` (the API, the command and the package itself) and the command's parts
in ``fold/command/``; they may import any stage and no stage may import them."""
ENTRY_PACKAGES = {"command"}
MAX_TOP_FILES = 6
MAX_LINES = 450
"""A module past this many lines asks to be split by what it holds."""


def stage_of(module: str) -> int:
    if module in SHARED or module.startswith("fold._native"):
        return 0
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in STAGES:
        return STAGES[parts[1]]
    return ENTRY


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    if name in SHARED:
        return True
    relative = Path(*name.split("."))
    return (ROOT / relative).with_suffix(".py").is_file() or (ROOT / relative).is_dir()


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    # A relative import counts from the module's package: itself when it is an __init__.
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(module: str, source: str, *, is_package: bool = False) -> set[str]:
    """Every module of ours that ``module`` imports, at any depth of its code: the module a name
    comes from, or the module itself when the name is one (``from fold.folding import warm``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("fold."))
        elif isinstance(node, ast.ImportFrom):
            source_module = _absolute(module, node, is_package)
            if source_module != "fold" and not source_module.startswith("fold."):
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                found.add(full if is_module(full) else source_module)
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    return {
        module_name(path): imported_modules(
            module_name(path), path.read_text(), is_package=path.name == "__init__.py"
        )
        for path in package_modules()
    }


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as the modules around it in import order, or None when it has
    none: a depth-first walk that meets a module still on its path has closed one."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path = [start]
        todo = [iter(sorted(graph[start]))]
        while todo:
            target = next(todo[-1], None)
            if target is None:
                done.add(path.pop())
                todo.pop()
            elif target in path:
                return path[path.index(target) :]
            elif target not in done and target in graph:
                path.append(target)
                todo.append(iter(sorted(graph[target])))
    return None


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """What is wrong with one module's imports, one sentence each (empty when nothing is)."""
    own = stage_of(module)
    found: list[str] = []
    imported_modules: set[str] = set()

    def judge(target: str, line: int) -> None:
        if not (target == "fold" or target.startswith("fold.")):
            return
        if own != ENTRY and stage_of(target) > own:
            found.append(f"{module}:{line} imports {target}, a later stage or an entry point")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                judge(alias.name, node.lineno)
                if alias.name.startswith("fold."):
                    imported_modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom):
            source_module = _absolute(module, node, is_package)
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if is_module(full):
                    judge(full, node.lineno)
                    imported_modules.add(alias.asname or alias.name)
                    continue
                judge(source_module, node.lineno)
                if alias.name.startswith("_") and source_module != module:
                    found.append(
                        f"{module}:{node.lineno} imports {alias.name}, private to {source_module}"
                    )
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in imported_modules
        ):
            found.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}, a private name")
    return found


def package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_stages_are_packages_and_every_module_is_in_one():
    assert {
        path.name
        for path in PACKAGE.iterdir()
        if path.is_dir() and (path / "__init__.py").is_file()
    } == set(STAGES) | ENTRY_PACKAGES
    stray = [
        module_name(path)
        for path in package_modules()
        if stage_of(module_name(path)) == ENTRY
        and path.parent not in {PACKAGE, *(PACKAGE / name for name in ENTRY_PACKAGES)}
    ]
    assert stray == []


def test_the_top_of_the_package_keeps_only_the_entry_points():
    top = sorted(
        path.name for path in PACKAGE.iterdir() if path.is_file() and path.suffix in {".py", ".cc"}
    )
    assert len(top) <= MAX_TOP_FILES, top


@pytest.mark.parametrize("path", package_modules(), ids=lambda path: module_name(path))
def test_imports_flow_one_way_and_keep_private_names_private(path: Path):
    module = module_name(path)
    assert violations(module, path.read_text(), is_package=path.name == "__init__.py") == []


PLANTED = {
    "a reader importing the comparison": (
        "fold.inputs.reader",
        "from fold.compare.gap import GapAttribution\n",
        "imports fold.compare.gap, a later stage",
    ),
    "a fold importing the API": (
        "fold.folding.follow",
        "from fold.api import LogFold\n",
        "imports fold.api, a later stage or an entry point",
    ),
    "a presenter importing the command's run": (
        "fold.present.table",
        "from fold.command.run import run_fold\n",
        "imports fold.command.run, a later stage or an entry point",
    ),
    "a module imported whole from a later stage": (
        "fold.folding.result",
        "import fold.present.table\n",
        "imports fold.present.table",
    ),
    "a later stage named through its package": (
        "fold.inputs.arm",
        "from fold.folding import warm\n",
        "imports fold.folding.warm",
    ),
    "a relative import of a later stage": (
        "fold.compare.gap",
        "from ..present import table\n",
        "imports fold.present.table",
    ),
    "an import inside a function": (
        "fold.inputs.arm",
        "def f():\n    from fold.folding.cadence import fold_cadence\n    return fold_cadence\n",
        "imports fold.folding.cadence",
    ),
    "another module's private name": (
        "fold.folding.native",
        "from fold.folding.accumulate import _SCHEMAS\n",
        "imports _SCHEMAS, private to fold.folding.accumulate",
    ),
    "another module's private name through the module": (
        "fold.present.table",
        "from fold.folding import accumulate\nx = accumulate._assemble\n",
        "uses accumulate._assemble, a private name",
    ),
}


@pytest.mark.parametrize("case", PLANTED, ids=list(PLANTED))
def test_a_planted_wrong_import_is_caught(case: str):
    module, source, expected = PLANTED[case]
    found = violations(module, source)
    assert len(found) == 1 and expected in found[0], found


def test_imports_that_follow_the_stages_pass():
    source = (
        "from fold.errors import InputError\n"
        "from fold.inputs.arm import ArmRecord\n"
        "from fold.folding import accumulate\n"
        "from fold.folding.result import FoldResult\n"
        "import fold.compare.gap\n"
        "from fold import _native\n"
        "from . import speed\n"
        "def f(x):\n    return x._private, accumulate.SCHEMAS\n"
    )
    assert violations("fold.compare.our_runs", source) == []
    # The API may import every stage: it is where they meet.
    assert violations("fold.api", "from fold.present.table import render_table\n") == []


def test_no_import_cycle_even_through_function_or_type_only_imports():
    cycle = a_cycle(import_graph())
    assert cycle is None, " -> ".join([*cycle, cycle[0]])


PLANTED_CYCLES = {
    "an import inside a function": (
        "fold.present.table",
        "def f():\n    from fold.present.markdown import markdown_record\n",
    ),
    "an import only for the type checker": (
        "fold.ledger.schema",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from fold.ledger.store import Kept\n",
    ),
    "a relative import of a module by name": ("fold.folding.warm", "from . import log_fold\n"),
}


@pytest.mark.parametrize("case", PLANTED_CYCLES, ids=list(PLANTED_CYCLES))
def test_a_planted_cycle_is_caught(case: str):
    module, source = PLANTED_CYCLES[case]
    graph = import_graph()
    assert a_cycle(graph) is None
    graph[module] |= imported_modules(module, source)
    cycle = a_cycle(graph)
    assert cycle is not None and module in cycle, cycle


def test_a_cycle_is_found_and_named_in_import_order():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert a_cycle(graph) == ["a", "b", "c"]
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"b", "c"}}) is None
    assert a_cycle({"a": {"a"}}) == ["a"]


def native_sources() -> list[Path]:
    """The extension's C++ files: each file, not only each Python module, is held to the limit."""
    return sorted(p for p in (ROOT / "fold").rglob("*") if p.suffix in (".h", ".cc"))


def long_modules(paths: list[Path] | None = None) -> dict[str, int]:
    lengths = {
        path.name if ROOT not in path.parents else path.relative_to(ROOT).as_posix(): len(
            path.read_text().splitlines()
        )
        for path in (package_modules() + native_sources() if paths is None else paths)
    }
    return {name: count for name, count in lengths.items() if count > MAX_LINES}


def test_no_module_is_past_the_line_limit():
    assert ROOT / "fold" / "inputs" / "native_src" / "fold_pass.h" in native_sources()
    assert ROOT / "fold" / "_native.cc" in native_sources()
    assert long_modules() == {}


def test_a_planted_long_module_is_caught(tmp_path: Path):
    at_limit, past = tmp_path / "at_limit.py", tmp_path / "past.py"
    at_limit.write_text("x = 1\n" * MAX_LINES)
    past.write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules([at_limit, past]) == {"past.py": MAX_LINES + 1}


def class_modules(sources: dict[str, str]) -> dict[str, list[str]]:
    """Each class name defined in ``sources`` (module name to its text), with the modules that
    define a class of that name, at any depth of their code."""
    found: dict[str, list[str]] = {}
    for module, source in sorted(sources.items()):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(module)
    return found


def shared_class_names(sources: dict[str, str]) -> dict[str, list[str]]:
    """The class names two or more classes share: one name must mean one thing."""
    return {name: where for name, where in class_modules(sources).items() if len(where) > 1}


def _sources() -> dict[str, str]:
    return {module_name(path): path.read_text() for path in package_modules()}


def test_one_name_for_one_thing():
    """No two classes of ``fold/`` share a name; ``Document`` and ``OracleFile`` are each one."""
    sources = _sources()
    assert shared_class_names(sources) == {}
    classes = class_modules(sources)
    assert classes["Document"] == ["fold.folding.document"]
    assert classes["OracleFile"] == ["fold.inputs.oracles.source"]


def test_a_planted_second_class_of_a_name_is_caught():
    sources = _sources()
    copy = sources["fold.compare.arms"] + "\n\nclass Document:\n    pass\n"
    found = shared_class_names({**sources, "fold.compare.arms": copy})
    assert found == {"Document": ["fold.compare.arms", "fold.folding.document"]}


READING_STAGES = ("fold/inputs/", "fold/ledger/")
"""Where files are read: every outside format in inputs, the ledger's own files in ledger."""

READ_CALLS = {"open", "read_text", "read_bytes", "pread", "glob", "rglob", "iglob"}
"""Called by name or as a method: a file opened or read, a directory's names read."""
READ_MODULE_CALLS = {
    ("json", "load"),
    ("orjson", "load"),
    ("os", "open"),
    ("os", "pread"),
    ("os", "listdir"),
    ("os", "scandir"),
    ("np", "load"),
    ("np", "fromfile"),
    ("np", "memmap"),
}
"""A module's function that reads a file (``pl.read_*`` and ``pl.scan_*`` are matched apart)."""

READ_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("fold/folding/native.py", "open(path, 'rb')"): "the native pass opens the step log again "
    "to hand the lines it could not judge to inputs' exact parser (docs/code.md: for speed)",
    ("fold/folding/native.py", "os.pread(handle.fileno(), length, offset)"): "the same: each "
    "such line read at its offset, not the whole file again",
    ("fold/cli.py", "os.open(os.devnull, os.O_WRONLY)"): "not a read: stdout is pointed at "
    "the null device, for writing, after its reader stopped early (a broken pipe)",
    ("fold/command/streams.py", "os.open(os.devnull, os.O_WRONLY)"): "not a read: stderr is "
    "pointed at the null device, for writing, once it cannot be written (full, or closed)",
    ("fold/present/output.py", "open(target, 'wb')"): "not a read: an output that names a "
    "device or a pipe (/dev/null, a FIFO) is written in place, not renamed over",
}
"""Reads outside inputs and ledger: exact calls in named modules, each with its reason."""


def file_reads(source: str) -> list[str]:
    """Every call in ``source`` that opens or reads a file, as its source text."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            reads = func.id in READ_CALLS
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            reads = (
                func.attr in READ_CALLS
                or (owner, func.attr) in READ_MODULE_CALLS
                or (owner in ("pl", "polars") and func.attr.startswith(("read_", "scan_")))
            )
        else:
            reads = False
        if reads:
            found.append(ast.unparse(node))
    return found


def reads_outside_their_stages(sources: dict[str, str]) -> list[str]:
    """Reads in modules (by path under the project) outside inputs and ledger and not named."""
    return [
        f"{path}: {call}"
        for path, source in sorted(sources.items())
        if not path.startswith(READING_STAGES)
        for call in file_reads(source)
        if (path, call) not in READ_EXCEPTIONS
    ]


def _sources_by_path() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text() for path in package_modules()}


def test_files_are_read_only_in_inputs_and_ledger():
    assert reads_outside_their_stages(_sources_by_path()) == []


def test_every_read_exception_is_still_used():
    sources = _sources_by_path()
    used = {(path, call) for path, source in sources.items() for call in file_reads(source)}
    assert set(READ_EXCEPTIONS) - used == set()


def test_the_read_check_sees_inputs_reading():
    """It is not blind: inputs and the ledger read, and their reads are found."""
    sources = _sources_by_path()
    assert file_reads(sources["fold/inputs/reader.py"])
    assert any(file_reads(sources[path]) for path in sources if path.startswith("fold/ledger/"))


@pytest.mark.parametrize(
    ("path", "planted"),
    [
        ("fold/present/page.py", "def raw(path):\n    return open(path).read()\n"),
        ("fold/compare/matched.py", "def raw(path):\n    return path.read_text()\n"),
        ("fold/folding/result.py", "def raw(path):\n    return path.read_bytes()\n"),
        ("fold/folding/windows.py", "def frame(path):\n    return pl.read_csv(path)\n"),
        ("fold/compare/our_runs.py", "def frame(path):\n    return pl.scan_parquet(path)\n"),
        ("fold/api.py", "def fd(path):\n    return os.open(path, os.O_RDONLY)\n"),
        ("fold/folding/native.py", "def at(fd):\n    return os.pread(fd, 10, 0)\n"),
        ("fold/present/output.py", "def doc(handle):\n    return json.load(handle)\n"),
        ("fold/command/__init__.py", "def doc(path):\n    return path.open().read()\n"),
    ],
)
def test_a_planted_read_outside_inputs_and_ledger_is_caught(path: str, planted: str):
    sources = _sources_by_path()
    copy = {**sources, path: sources[path] + "\n\n" + planted}
    assert reads_outside_their_stages(copy) != []
