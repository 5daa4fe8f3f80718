"""Run the commands the docs show with their output, and compare what they print now.

A ```console block in README.md or a page under docs/ holds commands and what they print: a
command is a line starting with `$ ` (continued on the next line while it ends in a
backslash), and the lines after it, up to the next command or the end of the block, are its
output. Each command runs from the repository root in bash (with pipefail), at a fixed width
(COLUMNS=100), with this Python's bin directory first on PATH so `fold-acceptance` is the one
installed beside it, and what it writes to stdout and stderr is compared with the shown
output, trailing spaces and trailing blank lines aside. Each block runs in a fresh folder of
its own that links every entry of the repository root, so a block may write files (a ledger,
an export) that its later commands read, and finds none left by an earlier block or check; a
ledger's runs are kept at one fixed time (FOLD_ACCEPTANCE_KEPT_AT), so its tables print the
same every time. Blocks of any other kind (```sh) are not run: they hold the commands that
install things or run the long suites.

    python docs/check_commands.py            # check; exit 1 and a diff for each drifted output
    python docs/check_commands.py --update   # write what the commands print now into the docs
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100
TIMEOUT_S = 120
KEPT_AT = "2026-12-01T09:00:00"
FENCE_OPEN = "```console"
FENCE_CLOSE = "```"
PROMPT = "$ "


@dataclass(frozen=True)
class Command:
    """One `$ ` command of a console block: its text and the output the page shows for it."""

    path: Path
    line: int  # 1-based line of its `$ ` in the file
    source: tuple[str, ...]  # the command's lines as written, prompt included
    shown: tuple[str, ...]

    @property
    def text(self) -> str:
        lines = [self.source[0][len(PROMPT) :], *self.source[1:]]
        return "\n".join(lines)


@dataclass(frozen=True)
class Block:
    """A console block: the lines between its fences (0-based, end exclusive) and its commands."""

    path: Path
    start: int
    end: int
    commands: tuple[Command, ...]


@dataclass(frozen=True)
class Drift:
    command: Command
    printed: tuple[str, ...]

    def describe(self) -> str:
        diff = difflib.unified_diff(
            list(self.command.shown), list(self.printed), "shown", "printed", lineterm=""
        )
        where = f"{_relative(self.command.path)}:{self.command.line}"
        return f"{where}: `{self.command.text}` prints other output than shown\n" + "\n".join(diff)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def documented_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def find_blocks(path: Path, text: str) -> list[Block]:
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != FENCE_OPEN:
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].rstrip() != FENCE_CLOSE:
            end += 1
        if end == len(lines):
            raise ValueError(
                f"{_relative(path)}:{i + 1}: a ```console block is never closed: end it with ```"
            )
        blocks.append(Block(path, start, end, _commands(path, lines, start, end)))
        i = end + 1
    return blocks


def _commands(path: Path, lines: list[str], start: int, end: int) -> tuple[Command, ...]:
    if start < end and not lines[start].startswith(PROMPT):
        raise ValueError(
            f"{_relative(path)}:{start + 1}: a ```console block must start with a `$ ` command"
        )
    commands = []
    i = start
    while i < end:
        first = i
        while lines[i].endswith("\\") and i + 1 < end:
            i += 1
        source = tuple(lines[first : i + 1])
        i += 1
        output_start = i
        while i < end and not lines[i].startswith(PROMPT):
            i += 1
        commands.append(Command(path, first + 1, source, _normal(lines[output_start:i])))
    return tuple(commands)


def _normal(lines: list[str]) -> tuple[str, ...]:
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    return tuple(kept)


def environment() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE"}
    }
    bin_dir = str(Path(sys.executable).parent)
    env |= {"COLUMNS": str(WIDTH), "TERM": "dumb", "PATH": bin_dir + os.pathsep + env["PATH"],
            "FOLD_ACCEPTANCE_KEPT_AT": KEPT_AT}  # fmt: skip
    return env


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder holding a link to every entry of the repository root."""
    with tempfile.TemporaryDirectory(prefix="docs-block-") as folder:
        for entry in ROOT.iterdir():
            (Path(folder) / entry.name).symlink_to(entry)
        yield Path(folder)


def run(command: Command, cwd: Path = ROOT) -> tuple[str, ...]:
    try:
        completed = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command.text],
            cwd=cwd,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return (f"(no output: still running after {TIMEOUT_S} s)",)
    return _normal(completed.stdout.split("\n"))


def check(paths: list[Path]) -> tuple[list[Command], list[Drift]]:
    """Every documented command in `paths`, and those whose output differs from the shown one."""
    blocks = [block for path in paths for block in find_blocks(path, path.read_text())]
    commands = [command for block in blocks for command in block.commands]
    drifts = []
    for block in blocks:
        with scratch() as folder:
            for command in block.commands:
                printed = run(command, folder)
                if printed != command.shown:
                    drifts.append(Drift(command, printed))
    return commands, drifts


def update(path: Path) -> bool:
    """Rewrite the shown output of every console block in `path`; whether anything changed."""
    text = path.read_text()
    lines = text.split("\n")
    for block in reversed(find_blocks(path, text)):
        rewritten = []
        with scratch() as folder:
            for command in block.commands:
                rewritten += [*command.source, *run(command, folder)]
        lines[block.start : block.end] = rewritten
    new = "\n".join(lines)
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="write the printed outputs in")
    parser.add_argument("files", nargs="*", type=Path, help="default: README.md and docs/*.md")
    options = parser.parse_args(argv)
    try:
        paths = options.files or documented_files()
        if options.update:
            for path in paths:
                if update(path):
                    print(f"updated {_relative(path)}")
            return 0
        commands, drifts = check(paths)
    except (OSError, ValueError) as error:
        print(f"check_commands: {error}", file=sys.stderr)
        return 2
    for drift in drifts:
        print(drift.describe(), end="\n\n")
    print(f"{len(commands)} documented commands run, {len(drifts)} print other output than shown")
    return 1 if drifts else 0


if __name__ == "__main__":
    sys.exit(main())
