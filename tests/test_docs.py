"""Every command the docs show with its output prints that output (docs/check_commands.py, whose
convention docs/writing.md states), and the checker finds, compares and rewrites blocks as it
says: a drifted block fails, blocks of other kinds never run, `--update` touches only outputs."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_commands", ROOT / "docs/check_commands.py")
check_commands = importlib.util.module_from_spec(_spec)
sys.modules["check_commands"] = check_commands
_spec.loader.exec_module(check_commands)


def test_every_documented_command_prints_what_the_docs_show():
    commands, drifts = check_commands.check(check_commands.documented_files())
    by_file = {command.path.name for command in commands}
    # The README's worked example and the reference pages' examples are all found, not skipped.
    assert {"README.md", "command.md", "comparison.md", "counters.md", "runs.md",
            "ledger.md"} <= by_file  # fmt: skip
    assert len(commands) >= 10
    assert not drifts, (
        "\n\n".join(drift.describe() for drift in drifts)
        + "\n\nif the new output is right: .venv/bin/python docs/check_commands.py --update"
    )


def test_the_readme_shows_the_worked_example_against_two_oracles():
    readme = ROOT / "README.md"
    (block,) = check_commands.find_blocks(readme, readme.read_text())
    (command,) = block.commands
    assert command.text.split() == [
        "fold-acceptance",
        "fixtures/gate-example/our-arm.json",
        "fixtures/gate-example/steps.jsonl",
        "\\",
        "--vs",
        "vllm=fixtures/oracles/vllm-gate-arm.json",
        "--vs",
        "sglang=fixtures/oracles/sglang-legs.jsonl",
    ]
    shown = "\n".join(command.shown)
    assert "acceptance within 0.0% of vllm (tolerance 2%): the gap is execution speed" in shown


DRIFTED = """# A page

Some prose that stays as it is.

```console
$ printf 'one\\ntwo\\n'
one
three
$ echo "$COLUMNS" \\
    columns
100 columns
```

```sh
touch {marker}
```

```console
$ printf 'x  \\n\\n\\n'
x
```
"""


def test_a_drifted_output_fails_and_update_writes_the_printed_one(tmp_path):
    marker = tmp_path / "ran"
    page = tmp_path / "page.md"
    page.write_text(DRIFTED.format(marker=marker))

    commands, drifts = check_commands.check([page])
    assert [command.text for command in commands] == [
        "printf 'one\\ntwo\\n'",
        'echo "$COLUMNS" \\\n    columns',
        "printf 'x  \\n\\n\\n'",
    ]
    # The width is fixed (100 columns), trailing spaces and blank lines do not count, and the
    # one drifted output is named by its file and line with what it printed instead.
    (drift,) = drifts
    assert drift.command.line == 6
    assert drift.printed == ("one", "two")
    description = drift.describe()
    assert "page.md:6" in description and "-three" in description and "+two" in description
    assert not marker.exists(), "an ```sh block was run"
    assert check_commands.main([str(page)]) == 1

    assert check_commands.update(page) is True
    assert page.read_text() == DRIFTED.format(marker=marker).replace("one\nthree\n", "one\ntwo\n")
    assert check_commands.check([page])[1] == []
    assert check_commands.update(page) is False
    assert check_commands.main([str(page)]) == 0


def test_a_new_block_gets_its_output_from_update(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```console\n$ echo a\n$ echo b; echo c >&2\n```\n")
    assert len(check_commands.check([page])[1]) == 2
    check_commands.update(page)
    assert page.read_text() == "```console\n$ echo a\na\n$ echo b; echo c >&2\nb\nc\n```\n"


def test_each_block_runs_in_a_folder_of_its_own(tmp_path):
    """A block's later commands read what its earlier ones wrote; the next block, and the
    repository, see none of it; the repository's files are there to read; a ledger's runs are
    kept at the fixed time."""
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ echo kept > made.txt\n$ cat made.txt; head -c 12 fixtures/our-arm.json\n"
        'kept\n{\n  "arm": "\n$ echo $FOLD_ACCEPTANCE_KEPT_AT\n2026-12-01T09:00:00\n```\n\n'
        "```console\n$ ls made.txt 2>&1 | wc -l; test -e made.txt; echo $?\n1\n1\n```\n"
    )
    commands, drifts = check_commands.check([page])
    assert len(commands) == 4
    assert [drift.printed for drift in drifts] == []
    assert not (ROOT / "made.txt").exists()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("```console\n$ echo a\na\n", 3, "is never closed"),
        ("```console\nno prompt\n```\n", 4, "must start with a `$ ` command"),
    ],
)
def test_a_malformed_block_is_an_error_naming_its_line(tmp_path, capsys, text, line, message):
    page = tmp_path / "page.md"
    page.write_text("prose\n\n" + text)
    with pytest.raises(ValueError, match=re.escape(message)):
        check_commands.find_blocks(page, page.read_text())
    assert check_commands.main([str(page)]) == 2
    assert f"page.md:{line}: " in capsys.readouterr().err


def test_the_readme_is_a_front_page_with_the_two_start_here_commands():
    lines = (ROOT / "README.md").read_text().split("\n")
    assert len(lines) - 1 <= 250
    section = lines[lines.index("## Start here") + 1 :]
    section = section[: next(i for i, line in enumerate(section) if line.startswith("## "))]
    # .ci/run runs the first two ```sh blocks of this section as a new user types them.
    opened = [i for i, line in enumerate(section) if line == "```sh"]
    assert len(opened) == 2
    assert [section[i + 2] for i in opened] == ["```", "```"]
    assert "pip install ." in section[opened[0] + 1]
    assert "pip install -e '.[test]'" in section[opened[1] + 1]


# A repository file the docs name as a code path (docs/writing.md: files outside docs/ are named,
# not linked), such as `instrument/FORMAT.md` or `fold/spectrace.py`. Globs, templates and
# command lines are not paths.
NAMED = re.compile(r"`([^`\s]+/[^`\s]*)`")
FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
TOPS = {"benchmarks", "docs", "examples", "fixtures", "fold", "fuzz", "instrument", "tests", ".ci"}


def named_paths(text: str) -> list[str]:
    found = []
    for match in NAMED.finditer(FENCED.sub("", text)):
        path = match.group(1).rstrip(".,;:")
        if path.split("/")[0] in TOPS and not set(path) & set("*%$~<>{}=[]#"):
            found.append(path)
    return found


def test_every_repository_path_the_docs_name_exists():
    named = {
        (page.name, path)
        for page in check_commands.documented_files()
        for path in named_paths(page.read_text())
    }
    assert len(named) > 50
    assert [pair for pair in sorted(named) if not (ROOT / pair[1]).exists()] == []


def test_a_path_that_is_not_there_is_found():
    text = "`instrument/FORMAT.md`, `fold/nowhere.py`, `fixtures/*.jsonl`\n```sh\n`fold/x`\n```\n"
    assert named_paths(text) == ["instrument/FORMAT.md", "fold/nowhere.py"]
    assert not (ROOT / "fold/nowhere.py").exists()


@pytest.mark.parametrize("page", ["ledger.md", "matched.md", "fuzzing.md"])
def test_prose_lines_fit_in_100_columns(page):
    """Prose is wrapped at 100 columns, as the code is; tables and code blocks may run wider."""
    fenced, long = False, []
    for number, line in enumerate((ROOT / "docs" / page).read_text().split("\n"), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("|") and len(line) > 100:
            long.append(number)
    assert long == [], f"docs/{page}: lines {long} are over 100 characters"


def _resolves(dotted: str) -> bool:
    """Whether ``fold.a.b.C.m`` names a module, or an attribute chain under one."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_name_on_the_api_page_has_a_docstring_whose_references_resolve():
    """The API page is drawn from docstrings: an entry without one is empty, and a name one
    points to (``fold.x.y``) must exist (``fold.document`` did not)."""
    import importlib
    import inspect
    import re

    page = (ROOT / "docs" / "api.md").read_text()
    names = re.findall(r"^::: (\S+)", page, re.MULTILINE)
    assert "fold.inputs.arm.load_arm" in names
    for dotted in names:
        module, _, name = dotted.rpartition(".")
        found = getattr(importlib.import_module(module), name)
        members = [(dotted, found)]
        if inspect.isclass(found):
            members += [
                (f"{dotted}.{key}", value)
                for key, value in vars(found).items()
                if not key.startswith("_") and inspect.isfunction(value)
            ]
        for where, member in members:
            text = inspect.getdoc(member)
            assert text and text.strip(), f"{where} has no docstring"
            for reference in re.findall(r"``(fold\.[A-Za-z_][\w.]*)``", text):
                assert _resolves(reference), f"{where} names {reference}, which does not exist"


def test_the_reference_check_sees_a_name_that_is_not_there():
    assert _resolves("fold.folding.document.Document.to_json")
    assert not _resolves("fold.document.Document.to_json")
