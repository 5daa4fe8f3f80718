"""Run one fuzz target under atheris, or replay saved inputs through every target's check.

    python fuzz/fuzz.py TARGET [libFuzzer options] CORPUS_DIR...   a coverage-guided run
    python fuzz/fuzz.py --replay PATH...                           each input checked once
    python fuzz/fuzz.py --list                                     the targets

A replayed PATH is a target's directory (named after the target: ``fuzz/regressions/trace``),
a directory of such directories (``fuzz/regressions``), or ``TARGET:FILE``. Replay needs no
atheris and is what the tests run; it exits 1 when any input is a finding. ``*.md`` files
(notes) are not inputs.

With ``FUZZ_FINDINGS=DIR`` a coverage-guided run does not stop at a finding (a campaign): each
is kept under ``DIR/TARGET/`` with its message (``finding-*`` and ``finding-*.txt``). A run past
libFuzzer's ``-timeout`` or ``-rss_limit_mb`` still ends the process (``timeout-*``, ``oom-*``).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness import import_library  # noqa: E402
from targets import TARGETS, Target  # noqa: E402


def inputs(paths: list[str]) -> list[tuple[Target, Path]]:
    """The (target, file) pairs a replay of ``paths`` checks, in a stable order."""
    found: list[tuple[Target, Path]] = []
    for text in paths:
        name, colon, file = text.partition(":")
        if colon and name in TARGETS and not os.path.exists(text):
            found.append((TARGETS[name], Path(file)))
            continue
        path = Path(text)
        if not path.is_dir():
            raise SystemExit(f"{text}: give a target's directory, a directory of them, or "
                             "TARGET:FILE")  # fmt: skip
        if path.name in TARGETS:
            found += [(TARGETS[path.name], file) for file in _files(path)]
            continue
        for child in sorted(path.iterdir()):
            if child.is_dir() and child.name in TARGETS:
                found += [(TARGETS[child.name], file) for file in _files(child)]
            elif child.suffix != ".md":
                raise SystemExit(f"{child}: not a target's directory ({', '.join(TARGETS)})")
    return found


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix != ".md")


def replay(paths: list[str]) -> int:
    pairs = inputs(paths)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fold-fuzz-") as directory:
        for target, path in pairs:
            try:
                target.check(path.read_bytes(), directory)
            except AssertionError as finding:  # harness.Finding, differential.Finding
                failed += 1
                print(f"{target.name}:{path}: {finding}", file=sys.stderr)
    print(f"replayed {len(pairs)} inputs, {failed} findings")
    return 1 if failed else 0


def fuzz(target: Target, arguments: list[str]) -> int:
    import atheris

    with atheris.instrument_imports(include=["fold"]):
        import_library()  # imported here to be instrumented

    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    directory = tempfile.mkdtemp(prefix=f"fold-fuzz-{target.name}-", dir=shm)

    keep = os.environ.get("FUZZ_FINDINGS")

    def one_input(data: bytes) -> None:
        if keep is None:
            target.check(data, directory)
            return
        try:
            target.check(data, directory)
        except AssertionError as finding:
            _keep(Path(keep) / target.name, data, str(finding))

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.5:
            return atheris.Mutate(data, max_size)
        try:
            return target.mutate(data, rng)[:max_size]
        except Exception:  # a mutator's own defect must not end a campaign; the tests find it
            return atheris.Mutate(data, max_size)

    atheris.Setup([sys.argv[0], *arguments], one_input, custom_mutator=mutator)
    atheris.Fuzz()
    return 0


_SIGNATURE = re.compile(r"/\S+|\d+")
KEPT_PER_SIGNATURE = 5


def _keep(directory: Path, data: bytes, finding: str) -> None:
    """A campaign's finding kept and the campaign carried on (``FUZZ_FINDINGS``): the input
    as ``finding-SHA1`` and its message beside it, at most a few inputs per kind of message
    (the message with its paths and numbers left out)."""
    lines = finding.splitlines()
    kind = _SIGNATURE.sub("#", " ".join(lines[1:3] if len(lines) > 1 else lines))
    digest = hashlib.sha1(kind.encode()).hexdigest()[:12]
    directory.mkdir(parents=True, exist_ok=True)
    if len(list(directory.glob(f"finding-{digest}-*.txt"))) >= KEPT_PER_SIGNATURE:
        return
    name = f"finding-{digest}-{hashlib.sha1(data).hexdigest()[:12]}"
    (directory / name).write_bytes(data)
    (directory / f"{name}.txt").write_text(finding + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--replay"]:
        return replay(argv[1:])
    if argv[:1] == ["--list"]:
        for target in TARGETS.values():
            print(f"{target.name:16} {target.about}")
        return 0
    if not argv or argv[0] not in TARGETS:
        print(__doc__, file=sys.stderr)
        return 2
    return fuzz(TARGETS[argv[0]], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
