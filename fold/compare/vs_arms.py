"""``--vs`` arms: oracle files, and arm records of our own engine with their step logs.

A ``--vs NAME=PATH`` is one of our arm records when the spec says so (``NAME:ours=PATH``), when
``--vs-log NAME=LOG`` attaches step logs to it, or when the content shows it: a record whose
every leg carries the gate's generate window (``generate_start_unix``, ``generate_end_unix``),
which no oracle format records. Anything else is read as an oracle (``fold.inputs.oracles``).

Another run of ours is folded exactly as the main one: the same warm predicate, window, stall
factor, prefill convention and resamples, through the same library call, so the same refusals
hold; every message it raises starts with ``--vs NAME:``. Without ``--vs-log`` it is folded from
its legs' own engine counters (``fold.folding.counter_fold``), as the main arm is without a log; a
record with neither is refused with what to add. When the two runs' legs pair
(``fold.compare.leg_pairs.pairing``) it is resampled with the main run's seed, so each resample
draws the same legs on both sides (a paired bootstrap); otherwise with the seed plus its place among
the ``--vs`` arms, a stream of its own. Either way its row is its standalone fold with that seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from fold.compare.comparison import OURS, OURS_ALL, Arm, oracle_arms, our_arm
from fold.compare.leg_pairs import pairing, require_pairing
from fold.errors import FoldError, InputError
from fold.folding.log_fold import fold_acceptance
from fold.folding.warm import check_arm
from fold.inputs.arm import ArmRecord, load_arm
from fold.inputs.oracles import OURS_KIND, ArmFigures, VsSpec, detect_kind, parse_vs

WINDOW_FIELDS = ("generate_start_unix", "generate_end_unix")


def parse_vs_log(text: str) -> tuple[str, str]:
    """``NAME=LOG`` (a path or a glob) into ``(name, log)``."""
    name, sep, log = text.partition("=")
    if not sep or not name or not log:
        raise InputError(
            f"--vs-log {text!r}: expected NAME=LOG, the name of a --vs arm of ours and one of "
            "its step logs (a path or a quoted glob)"
        )
    return name, log


def split_spec(text: str) -> VsSpec:
    """``NAME[:KIND]=PATH``, where KIND may also be ``ours`` (never matched: a matched arm is
    an oracle run at our acceptance, ``fold.compare.matched_arms``)."""
    head, sep, path = text.partition("=")
    name, colon, kind = head.partition(":")
    words = {word.strip().lower().partition("@")[0] for word in kind.split("+")}
    if sep and colon and OURS_KIND in words:
        if len(words) > 1:
            raise InputError(
                f"--vs {text!r}: a run of ours takes no other modifier; 'matched' marks an "
                "oracle run at our acceptance"
            )
        checked = parse_vs(f"{name}={path}").name
        return VsSpec(checked, OURS_KIND, path)
    return parse_vs(text)


def looks_like_our_arm(path: str) -> bool:
    """A JSON record (or list) of legs that all carry the gate's generate window."""
    try:
        document = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    legs = document.get("legs") if isinstance(document, dict) else document
    return (
        isinstance(legs, list)
        and bool(legs)
        and all(isinstance(leg, dict) and all(key in leg for key in WINDOW_FIELDS) for leg in legs)
    )


def _oracle_kind(path: str) -> str | None:
    """The oracle engine the content shows, or None when it shows none."""
    try:
        return detect_kind(Path(path).read_text(encoding="utf-8"), where=path)
    except (InputError, OSError, UnicodeDecodeError):
        return None


def load_arms(
    specs: Sequence[str],
    log_specs: Sequence[str],
    *,
    main: ArmRecord,
    predicate: str,
    fold_options: dict[str, Any],
    paired: bool = False,
) -> list[ArmFigures | Arm]:
    """Every ``--vs`` arm in the order given: oracle figures, or another run of ours folded.

    ``fold_options`` are the main fold's keywords for :func:`fold.folding.log_fold.fold_acceptance`
    (its ``seed`` among them); ``paired`` refuses another run of ours whose legs do not pair."""
    logs: dict[str, list[str]] = {}
    for text in log_specs:
        name, log = parse_vs_log(text)
        logs.setdefault(name, []).append(log)
    parsed = [(split_spec(text), text) for text in specs]
    names = [spec.name for spec, _ in parsed]
    for name in logs:
        if name not in names:
            raise InputError(
                f"--vs-log {name}=...: no --vs arm is named {name!r}; give --vs {name}=ARM too"
            )
    arms: list[ArmFigures | Arm] = []
    seen: set[str] = set()
    main_warm = None
    for position, ((name, kind, path, matched), text) in enumerate(parsed, start=1):
        if name in (OURS, OURS_ALL) or name in seen:
            raise InputError(f"--vs {text!r}: the name {name!r} is taken; give each arm its own")
        seen.add(name)
        if kind is None and name not in logs and looks_like_our_arm(path):
            also = _oracle_kind(path)
            if also is not None:
                raise InputError(
                    f"--vs {text!r}: {path} reads both as an arm record of ours (every leg has "
                    f"the gate's generate window) and as {also} data; say which: --vs "
                    f"{name}:ours=ARM with --vs-log {name}=LOG, or --vs {name}:{also}=PATH"
                )
        if kind is None and matched is None and (name in logs or looks_like_our_arm(path)):
            kind = OURS_KIND
        if kind != OURS_KIND:
            if name in logs:
                raise InputError(
                    f"--vs-log {name}=...: {name} is given as a {kind} arm; step logs go with "
                    f"an arm record of ours (--vs {name}:ours=ARM)"
                )
            arms += oracle_arms(text, name, kind, path, seen, matched)
            continue
        if main_warm is None:
            main_warm = check_arm(main, predicate).warm_legs
        arms.append(
            _fold_run(name, path, logs.get(name, []), main, main_warm, predicate, fold_options,
                      paired, position)
        )  # fmt: skip
    return arms


def _fold_run(
    name: str,
    path: str,
    logs: list[str],
    main: ArmRecord,
    main_warm: Sequence[int],
    predicate: str,
    options: dict[str, Any],
    paired: bool,
    position: int,
) -> Arm:
    try:
        record = load_arm(path)
        if not logs and not any(counts is not None for counts in _leg_counters(record)):
            raise InputError(
                f"{path} is an arm record of ours with no step log and no engine counters on "
                f"its legs; attach its step logs with --vs-log {name}=LOG (repeatable, globs as "
                "for the main logs), or take a record whose legs carry spec_drafts_proposed, "
                "spec_drafts_accepted and spec_drafted_request_steps"
            )
        warm = check_arm(record, predicate).warm_legs
        found = pairing(main, record, main_warm, warm, name)
        if paired:
            require_pairing(found, name)
        seed = options["seed"] if found.paired else options["seed"] + position
        result = fold_acceptance(record, logs, predicate=predicate, **{**options, "seed": seed})
    except FoldError as error:
        raise type(error)(f"--vs {name}: {error}") from error
    return our_arm(result, name, record)


def _leg_counters(record: ArmRecord) -> tuple:
    return () if record.counters is None else record.counters.legs
