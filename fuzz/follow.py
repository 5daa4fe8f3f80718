"""The follow target: a step log appended in pieces and followed, against the one-shot fold.

Each input is a step log (bytes, any bytes). It is folded over ``fuzz/arm.json`` once whole
(``fold.api.fold_acceptance``), then written again from nothing in one to six pieces cut at
offsets drawn from the input itself (most after a newline, some inside a line, as a writer's
buffer may end), each followed by a poll of a ``fold.folding.follow.Follower``, whose
``finish`` gives its fold. That is done with the native reader at a block of a hundred bytes and at
the follower's own, and with the polars reference at one of them, with and without
``--skip-bad-lines`` (the latter only when the log has a line to skip). Half the mutations
move a line elsewhere in the log (a writer's lines out of time order), the others are the
step log's.

Every follow above has the arm record there from the start, so the polls read the log piece
by piece. One more follow (native, small block) gives the record a story drawn from the input
(``record_story``): written only before some piece or before the end; first a record of
fewer legs, or one that does not load, then the whole one; or there at first and removed
before some later piece or before the end. Each ends with the whole record as the one the
follow last read, so each follow must end as the one-shot fold over it. A finding is any of:

- a follow whose outcome differs from the one-shot fold's: its JSON, or the error it raises
  (type and message), a refusal included;
- an error that is not one of the library's own (``fold.errors.FoldError``): what the command
  would print as "this is a bug".

The cuts are the input's: a finding replays as it was found. ``tests/test_follow.py`` holds
the follower to the one-shot fold on chosen logs; this throws any log at it, split anywhere.
"""

from __future__ import annotations

import json
import os
import random
import sys
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # harness.py beside this file, also when it is loaded by path
import differential  # noqa: E402  the step log's line mutations
from harness import Finding, reader  # noqa: E402

ARM = str(HERE / "arm.json")
STORIES = ("there", "appears", "grows", "mended", "removed")
"""What becomes of the arm record while a log is followed (``record_story``)."""
SMALL_BLOCK = 97
"""Bytes a follower reads at a time in half the follows: a poll's bytes span several blocks,
and a block ends inside a line."""
RESAMPLES = 16
"""Every fold here draws its intervals (a few resamples): a follower's fold must draw the very
requests the one-shot fold draws. They cost nothing measurable: the saved inputs replay in the
same 12 s with none."""


def pieces(data: bytes) -> list[bytes]:
    """``data`` cut in one to six pieces at offsets drawn from a generator seeded by it: most
    after a newline, as a writer flushes whole lines, the others anywhere."""
    rng = random.Random(zlib.crc32(data))
    line_ends = [at + 1 for at, byte in enumerate(data[:-1]) if byte == 0x0A]
    offsets = set()
    for _ in range(rng.randint(0, 5)):
        if line_ends and rng.random() < 0.75:
            offsets.add(rng.choice(line_ends))
        elif len(data) > 1:
            offsets.add(rng.randrange(1, len(data)))
    cuts = sorted(offsets)
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def record_story(data: bytes, pieces: int) -> tuple[str, int]:
    """The record's story for a follow of ``data`` in ``pieces`` pieces, besides being there
    from the start, and the piece before whose write its change comes (``pieces``: after the
    last poll, before the end): at least 1, so that a poll sees it before its change."""
    rng = random.Random(zlib.crc32(data) ^ 0xA53)
    story = rng.choice(STORIES[1:])
    # Before piece 0 would be the record there from the start (the follower reads it at its
    # first poll), which every input is followed with anyway (``check``).
    return story, rng.randint(1, pieces)


def _write_record(path: str, story: str, first: bool) -> None:
    """The record at ``path`` as the story has it: before its change (``first``) or after.
    Written beside and renamed, as a gate writes it, so a poll never reads half of it."""
    whole = Path(ARM).read_bytes()
    if story == "removed" and not first:
        os.unlink(path)
        return
    if story == "appears" and first:
        return
    content = whole
    if first and story == "grows":
        # The record as a gate might write it part-way: the cold leg and one warm leg.
        record = json.loads(whole)
        content = json.dumps({**record, "legs": record["legs"][:2]}).encode()
    elif first and story == "mended":
        content = whole[: len(whole) // 2]  # not JSON: refused while following, then mended
    with open(path + ".tmp", "wb") as handle:
        handle.write(content)
    os.replace(path + ".tmp", path)


def mutate(data: bytes, rng: Any) -> bytes:
    """The step log's line mutations (``differential.mutate_lines``), or a line moved: a
    writer's lines out of time order, which the follower reads back across polls."""
    lines = data.split(b"\n")
    if rng.random() < 0.5 or len(lines) < 3:
        return differential.mutate_lines(data, rng)
    moved = lines.pop(rng.randrange(len(lines) - 1))
    lines.insert(rng.randrange(len(lines)), moved)
    return b"\n".join(lines)


def _outcome(fold: Callable[[], Any]) -> tuple[str, Any]:
    """("json", the document's JSON) or ("error", type and message) of ``fold()``; any error
    not the library's own is a finding."""
    from fold.errors import FoldError

    try:
        return "json", fold().to_json()
    except FoldError as error:
        return "error", (type(error).__name__, str(error))
    except Exception as error:
        raise Finding(f"an unexpected {type(error).__name__}:\n{traceback.format_exc()}") from error


def _with_reader(native: bool, fold: Callable[[], Any]) -> tuple[str, Any]:
    with reader(native):
        return _outcome(fold)


def check(data: bytes, directory: str) -> None:
    """Raise ``Finding`` when a follow of ``data`` in pieces differs from its one-shot fold."""
    from fold.api import fold_acceptance
    from fold.folding.follow import DEFAULT_FOLLOW_BLOCK_BYTES

    log = os.path.join(directory, "steps.jsonl")
    split = pieces(data)
    there, story = ("there", 0), record_story(data, len(split))
    # The native reader (whose read-back of lines out of order is its own C++) at both
    # blocks; the reference at one, the input's pick (a poll builds a whole view: a follow
    # costs as much as a few one-shot folds). Each with the record there from the start, so
    # that the polls read the log piece by piece; and once with the record's story, whose
    # change makes the follower read the log again from the start (the record's handling is
    # the follower's own, whichever reader).
    reference_block = (SMALL_BLOCK, DEFAULT_FOLLOW_BLOCK_BYTES)[zlib.crc32(data) % 2]
    follows = (
        (True, SMALL_BLOCK, there),
        (True, DEFAULT_FOLLOW_BLOCK_BYTES, there),
        (False, reference_block, there),
        (True, SMALL_BLOCK, story),
    )
    without_skipping: tuple[str, Any] | None = None
    record = os.path.join(directory, "arm.json")
    for skip in (False, True):
        with open(log, "wb") as handle:
            handle.write(data)
        _write_record(record, "there", first=True)  # the whole record, where the follows have it
        whole = _with_reader(
            True,
            lambda skip=skip: fold_acceptance(  # type: ignore[misc]
                record, [log], resamples=RESAMPLES, skip_bad_lines=skip
            ),
        )
        if skip and whole == without_skipping:
            return  # no bad line to skip: the follows above were these
        without_skipping = whole
        for native, block, told in follows:
            followed = _with_reader(
                native,
                lambda block=block, skip=skip, told=told: _follow(log, split, block, skip, told),  # type: ignore[misc]
            )
            if followed != whole:
                raise Finding(
                    f"a follow in {len(split)} pieces (native={native}, block={block}, "
                    f"skip_bad_lines={skip}, record {told[0]} before piece {told[1]}) "
                    f"differs from the one-shot fold:\n"
                    f"  followed  {_short(followed)}\n  one-shot  {_short(whole)}"
                    f"{_where(followed, whole)}"
                )


def _follow(log: str, split: list[bytes], block: int, skip: bool, story: tuple[str, int]) -> Any:
    """The fold of a follower that polled ``log`` after each piece was appended to it, the
    arm record beside it changing as ``story`` tells (``record_story``)."""
    from fold.folding.follow import Follower

    told, change_at = story
    record = os.path.join(os.path.dirname(log), "arm.json")
    if os.path.exists(record):
        os.unlink(record)
    _write_record(record, told, first=True)
    with open(log, "wb"):
        pass
    follower = Follower(record, [log], block_bytes=block, resamples=RESAMPLES, skip_bad_lines=skip)
    for at, piece in enumerate(split):
        if at == change_at and told != "there":
            _write_record(record, told, first=False)
        with open(log, "ab") as handle:
            handle.write(piece)
        follower.poll()
    if change_at == len(split):
        _write_record(record, told, first=False)
    return follower.finish()


def _short(outcome: tuple[str, Any]) -> str:
    kind, value = outcome
    if kind == "error":
        return repr(value)
    return f"JSON with legs {[leg.get('steps') for leg in value.get('legs', [])]}"


def _where(followed: tuple[str, Any], whole: tuple[str, Any]) -> str:
    """Where two JSON outcomes first differ, when their legs' steps look the same (an
    interval, a cadence): the paths of the first few differing values."""
    if followed[0] != "json" or whole[0] != "json":
        return ""
    paths: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(paths) >= 3 or a == b:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                walk(a.get(key), b.get(key), f"{path}.{key}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for index, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{index}]")
        else:
            paths.append(f"{path}: {a!r} != {b!r}")

    walk(followed[1], whole[1], "")
    return "\n  first differences: " + "; ".join(paths) if paths else ""
