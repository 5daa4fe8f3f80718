"""Differential fuzzer: the native reader against the polars reference, through the command.

Each input is a step log (bytes, any bytes). It is folded over ``fuzz/arm.json`` by
``fold.cli.main`` (the command itself: argument parsing, the reader the environment selects,
the fold, the JSON on stdout, the error handling) four times: native and reference, each with
and without ``--skip-bad-lines``. A finding is any of:

- the two readers differ in exit status, stdout or stderr, or the native reader differs from
  itself read on several threads (a share of ``THREAD_SHARE`` bytes);
- an exit status other than 0, 1 or 2, or the command's "this is a bug" line (an unexpected
  exception: ``fold.cli`` turns those into a message instead of a traceback);
- a negative count in the JSON, or a histogram or per-position list longer than the format's
  cap on a step's tokens allows (a figure that grew with a value);
- a fold without ``--skip-bad-lines`` that succeeds but differs from the fold with it (with no
  bad line, skipping changes nothing);
- for a log that may carry the steps' durations (``draft_ns``, ``verify_ns``, which the JSON
  does not show yet): the two readers' per-leg and per-request sums of them differ, or one is
  negative (``fold.folding.step_durations``, read through the library);
- for a log the command folds: the sums file's rows (``--sums``: each request's steps by
  draft position, which the native pass counts as it reads) differ between the readers, or
  on several threads.

Inputs are mutated by libFuzzer's byte mutations and, half the time, by ``mutate_lines``,
which changes one line the way a writer could (edge values, unknown keys, key order and
spacing, repeated, dropped and glued lines, times on window edges).

Run: ``python fuzz/differential.py [libFuzzer options] CORPUS_DIR...`` (atheris, the ``fuzz``
extra); ``fuzz/run.sh`` runs the short, bounded campaign CI runs. Without atheris,
``python fuzz/differential.py --replay FILE_OR_DIR...`` checks inputs once each.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ARM = str(HERE / "arm.json")
sys.path.insert(0, str(HERE))  # harness.py beside this file, also when it is loaded by path
from harness import import_library, reader, run  # noqa: E402

# The cap on a step's tokens (fold.inputs.limits.MAX_STEP_TOKENS, FORMAT.md), repeated so that a
# change to it is a finding until this is changed too.
MAX_STEP_TOKENS = 2**16
_COUNTS = ("steps", "proposed", "accepted", "emitted", "lines", "torn_lines", "skipped_lines",
           "lost_lines", "unattributed_steps", "ambiguous_steps")  # fmt: skip


class Finding(AssertionError):
    """What the fuzzer reports: the input breaks one of the rules above."""


THREAD_SHARE = 97
"""Bytes a reading thread takes in the third fold of each input: a log of a few lines is read
on every core, so a request two ranges share is folded again from its bytes (the one path
only logs of many MiB take otherwise)."""


def _command(
    log: str, *, native: bool, skip: bool, bytes_per_thread: int | None = None
) -> tuple[int, bytes, str]:
    """(exit status, stdout, stderr) of ``fold-acceptance ARM LOG --json -`` in this process,
    run as every target runs the command (``harness.run``); ``bytes_per_thread``: the native
    reader's thread share for this run."""
    arguments = [ARM, log, "--json", "-", "--bootstrap", "0", "--quiet"]
    if skip:
        arguments.append("--skip-bad-lines")
    import fold.folding.native as native_reader

    saved = native_reader.BYTES_PER_THREAD
    native_reader.BYTES_PER_THREAD = bytes_per_thread
    try:
        outcome = run(arguments, native=native)
    finally:
        native_reader.BYTES_PER_THREAD = saved
    return outcome.status, outcome.stdout, outcome.stderr


def _check_document(text: bytes) -> None:
    document = json.loads(text)
    folds = [*document["legs"], document["warm"], document["all"]]
    for fold in folds:
        if len(fold["histogram"]) > MAX_STEP_TOKENS + 1:
            raise Finding(f"a histogram of {len(fold['histogram'])} entries")
        if len(fold["per_position"]) > MAX_STEP_TOKENS:
            raise Finding(f"per_position of {len(fold['per_position'])} entries")
        if any(count < 0 for count in fold["histogram"]):
            raise Finding(f"a negative histogram count: {fold['histogram']}")
    for owner in [*folds, document, *document.get("files", []), *document.get("writers", [])]:
        for key in _COUNTS:
            value = owner.get(key)
            if isinstance(value, int) and value < 0:
                raise Finding(f"{key} = {value}")


def check(data: bytes, directory: str) -> None:
    """Raise ``Finding`` when ``data``, as a step log, breaks a rule (module docstring)."""
    log = os.path.join(directory, "steps.jsonl")
    with open(log, "wb") as handle:
        handle.write(data)
    outcomes = {}
    for skip in (False, True):
        native = _command(log, native=True, skip=skip)
        reference = _command(log, native=False, skip=skip)
        if native != reference:
            raise Finding(
                f"the readers differ (skip_bad_lines={skip}):\n  native    {native!r}\n"
                f"  reference {reference!r}"
            )
        threaded = _command(log, native=True, skip=skip, bytes_per_thread=THREAD_SHARE)
        if threaded != native:
            raise Finding(
                f"the native reader differs on several threads (skip_bad_lines={skip}):\n"
                f"  threads   {threaded!r}\n  one       {native!r}"
            )
        status, stdout, stderr = native
        if status not in (0, 1, 2):
            raise Finding(f"exit status {status}: {stderr}")
        if "this is a bug" in stderr or "Traceback" in stderr:
            raise Finding(f"an unexpected exception: {stderr}")
        if status == 0:
            _check_document(stdout)
        outcomes[skip] = native
        if status == 0 and _may_carry_durations(data):
            _check_durations(log, skip)
        if status == 0:
            _check_sums(log, skip)
    if outcomes[False][0] == 0 and outcomes[False] != outcomes[True]:
        raise Finding("a fold with no bad line changes with --skip-bad-lines")


def _may_carry_durations(data: bytes) -> bool:
    # An escaped key (``"draft\u005fns"``) names the key too.
    return b"_ns" in data.replace(b'"t_ns"', b"") or b"\\u" in data


def _durations(log: str, *, native: bool, skip: bool) -> Any:
    from fold.api import fold_acceptance

    with reader(native):
        return fold_acceptance(ARM, [log], skip_bad_lines=skip, resamples=0).fold.durations


def _check_durations(log: str, skip: bool) -> None:
    """The steps' durations both readers sum, where the command folded the log."""
    native = _durations(log, native=True, skip=skip)
    reference = _durations(log, native=False, skip=skip)
    if native != reference:
        raise Finding(
            f"the readers' step durations differ (skip_bad_lines={skip}):\n"
            f"  native    {native!r}\n  reference {reference!r}"
        )
    if native is None:
        return
    for leg, requests in native.requests.items():
        for request in (native.leg(leg), *requests):
            sums = request.to_json() if hasattr(request, "to_json") else dict(request)
            if any(isinstance(v, int) and v < 0 for k, v in sums.items() if k != "seq"):
                raise Finding(f"a negative duration sum in leg {leg}: {sums}")


def _sums(log: str, *, native: bool, skip: bool, bytes_per_thread: int | None = None) -> Any:
    """The sums file's rows of the fold of ``log`` (a host refused alone still has them), their
    figures' columns: what the fold keeps of a request besides differs by reader by design
    (the reference holds a request's lines, the native pass the rows it folded from them)."""
    import fold.folding.native as native_reader
    from fold.api import fold_acceptance
    from fold.folding.host_sums import FIGURE_COLUMNS, RefusedWithSums

    saved = native_reader.BYTES_PER_THREAD
    native_reader.BYTES_PER_THREAD = bytes_per_thread
    try:
        with reader(native):
            document = fold_acceptance(ARM, [log], skip_bad_lines=skip, resamples=0, sums=True)
            sums = document.sums
    except RefusedWithSums as refused:
        sums = refused.sums
    finally:
        native_reader.BYTES_PER_THREAD = saved
    return None if sums is None else sums.table.select(list(FIGURE_COLUMNS))


def _check_sums(log: str, skip: bool) -> None:
    native = _sums(log, native=True, skip=skip)
    for other, how in (
        (_sums(log, native=False, skip=skip), "the reference"),
        (_sums(log, native=True, skip=skip, bytes_per_thread=THREAD_SHARE), "several threads"),
    ):
        same = native is None and other is None
        if not same and (native is None or other is None or not native.equals(other)):
            raise Finding(
                f"the sums file's rows differ with {how} (skip_bad_lines={skip}):\n"
                f"  native {native!r}\n  {how} {other!r}"
            )


# -- a mutator that knows the format ----------------------------------------------------------
# Random bytes mostly make lines that are not JSON, which both readers reject early. Half the
# mutations are libFuzzer's; the other half change one line as a writer could have written it:
# a field's value swapped for an edge case, an unknown key added, keys reordered and spaced,
# a line repeated, dropped or torn and glued to the next, a time moved to a window's edge.

_EDGES = [b"0", b"-0", b"1", b"-1", b"7", b"65535", b"65536", b"65537", b"2147483648",
          b"4294967295", b"9223372036854775807", b"9223372036854775808",
          b"18446744073709551615", b"18446744073709551616", b"1.0", b"1e2", b"1e999",
          b"-1e999", b"1" + b"0" * 250 + b"e99", b"9" * 320, b"null", b"true", b"\"\"",
          b'"5f0c1a2b3c4d5e6f"', b'"warm"', b'"b"', b'"\\u00e4"', b'"\\ud800"', b"[]",
          b"{}", b'{"a":[1,{"b":null}]}', b'"cmpl-3f2a"', b'"7"', b'"\\u0063mpl-3f2a"',
          b'"' + b"x" * 256 + b'"', b'"' + b"x" * 257 + b'"']  # fmt: skip
_KEYS = [b"v", b"w", b"n", b"t_ns", b"pid", b"seq", b"proposed", b"accepted", b"emitted",
         b"draft_ns", b"verify_ns", b"leg", b"x", b"host"]  # fmt: skip
# The legs' window edges in fuzz/arm.json (ns), each +-1 ns and +-500 ns (the widened band).
_TIMES = [edge + offset for edge in (1764450000000000000, 1764450000001000000,
          1764450000001500000, 1764450000002000000, 1764450000003000000)
          for offset in (-501, -500, -1, 0, 1, 500, 501)]  # fmt: skip


class _Literal(str):
    """A number or constant as the line wrote it, so that rewriting a line keeps it as it was
    (``1e999`` stays ``1e999``, not ``Infinity``)."""


def _encoded(value: Any) -> str:
    if isinstance(value, _Literal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_encoded(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encoded(item) for item in value) + "]"
    return json.dumps(value)  # ASCII: an unpaired surrogate stays an escape


def _members(line: bytes) -> list[tuple[bytes, bytes]] | None:
    """A line's top-level keys (JSON-encoded, quotes included) and values, when it is an
    object."""
    try:
        value = json.loads(line, parse_int=_Literal, parse_float=_Literal,
                           parse_constant=_Literal)  # fmt: skip
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return [(json.dumps(key).encode(), _encoded(item).encode()) for key, item in value.items()]


def _write(members: list[tuple[bytes, bytes]], space: bytes) -> bytes:
    parts = [key + space + b":" + space + value for key, value in members]
    return b"{" + (b"," + space).join(parts) + b"}"


def mutate_lines(data: bytes, rng: Any) -> bytes:
    lines = data.split(b"\n")
    place = rng.randrange(len(lines))
    line = lines[place]
    operation = rng.randrange(7)
    if operation == 0 and len(lines) > 1:
        del lines[place]
    elif operation == 1:
        lines.insert(place, line)
    elif operation == 2 and place + 1 < len(lines) and line:
        lines[place : place + 2] = [line[: rng.randrange(len(line))] + lines[place + 1]]
    else:
        members = _members(line)
        if members is None:
            return data
        if operation == 3:
            rng.shuffle(members)
        elif operation == 4:
            members.append((b'"' + rng.choice(_KEYS) + b'"', rng.choice(_EDGES)))
        elif operation == 5:
            members = [(k, str(rng.choice(_TIMES)).encode() if k == b'"t_ns"' else v)
                       for k, v in members]  # fmt: skip
        elif members:
            index = rng.randrange(len(members))
            members[index] = (members[index][0], rng.choice(_EDGES))
        lines[place] = _write(members, rng.choice([b"", b"", b" ", b"\t"]))
    return b"\n".join(lines)


def _replay(paths: list[str]) -> int:
    files = []
    for name in paths:
        path = Path(name)
        files.extend(sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fold-fuzz-") as directory:
        for path in files:
            try:
                check(path.read_bytes(), directory)
            except Finding as finding:
                failed += 1
                print(f"{path}: {finding}", file=sys.stderr)
    print(f"replayed {len(files)} inputs, {failed} findings")
    return 1 if failed else 0


def main() -> int:
    if sys.argv[1:2] == ["--replay"]:
        return _replay(sys.argv[2:])
    import atheris

    with atheris.instrument_imports(include=["fold"]):
        import_library()  # imported here to be instrumented

    directory = tempfile.mkdtemp(prefix="fold-fuzz-", dir="/dev/shm" if os.path.isdir(
        "/dev/shm") else None)  # fmt: skip

    def one_input(data: bytes) -> None:
        check(data, directory)

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.5:
            return atheris.Mutate(data, max_size)
        return mutate_lines(data, rng)[:max_size]

    atheris.Setup(sys.argv, one_input, custom_mutator=mutator)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
