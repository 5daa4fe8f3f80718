"""The ``--vs`` and ``--vs-log`` arguments read: each arm an oracle's figures (one per run of a
sweep file, ``fold.inputs.oracles``), or an arm record of our own engine with its step logs.

A ``--vs NAME=PATH`` is one of our arm records when the spec says so (``NAME:ours=PATH``), when
``--vs-log NAME=LOG`` attaches step logs to it, or when the content shows it: a record whose
every leg carries the gate's generate window (``generate_start_unix``, ``generate_end_unix``),
which no oracle format records. Anything else is read as an oracle. A run of ours is read here
and folded by the comparison (``fold.compare.vs_arms``), as the main run is; every message
about it starts with ``--vs NAME:``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from fold.errors import FoldError, InputError, placed
from fold.inputs.arm import ArmRecord, load_arm
from fold.inputs.oracles import (
    OURS_KIND,
    ArmFigures,
    MatchedAs,
    VsSpec,
    detect_kind,
    load_oracle_arms,
    parse_vs,
)

WINDOW_FIELDS = ("generate_start_unix", "generate_end_unix")


@dataclass(frozen=True)
class OurRun:
    """An arm record of our own engine given with ``--vs``, and its step logs (none: folded
    from its legs' engine counters). ``position`` is its place among the ``--vs`` arms, from
    1."""

    name: str
    path: str
    record: ArmRecord
    logs: tuple[str, ...]
    position: int


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


def read_vs_arms(
    specs: Sequence[str], log_specs: Sequence[str], *, taken: Collection[str] = ()
) -> list[ArmFigures | OurRun]:
    """Every ``--vs`` arm in the order given, read: oracle figures, or a run of ours to fold.
    ``taken`` are the names the comparison gives its own rows; no arm may have one."""
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
    arms: list[ArmFigures | OurRun] = []
    seen: set[str] = set()
    for position, ((name, kind, path, matched), text) in enumerate(parsed, start=1):
        if name in taken or name in seen:
            raise InputError(f"--vs {text!r}: the name {name!r} is taken; give each arm its own")
        seen.add(name)
        if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
            raise InputError(
                f"--vs {text!r}: {path} is not a regular file (a pipe or a device); an arm's "
                "file is read more than once (its kind, then its figures): save it to a file"
            )
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
            arms += _oracle_arms(text, name, kind, path, seen, matched, taken)
            continue
        arms.append(_our_run(name, path, logs.get(name, []), position))
    return arms


def _oracle_arms(
    spec: str,
    name: str,
    kind: str | None,
    path: str,
    seen: set[str],
    matched: MatchedAs | None,
    taken: Collection[str],
) -> list[ArmFigures]:
    """The oracle arms of one ``--vs`` whose ``name`` the caller has taken: one, or one per run
    of a sweep file (``NAME#1``, ...), each of those names checked free and added to ``seen``."""
    arms = load_oracle_arms(name, path, kind, matched)
    for arm in arms:
        if arm.name == name:
            continue
        if arm.name in taken or arm.name in seen:
            raise InputError(
                f"--vs {spec!r}: the name {arm.name!r} is taken; give each arm its own"
            )
        seen.add(arm.name)
    return arms


def _our_run(name: str, path: str, logs: list[str], position: int) -> OurRun:
    try:
        record = load_arm(path)
        if not logs and not any(counts is not None for counts in _leg_counters(record)):
            raise InputError(
                f"{path} is an arm record of ours with no step log and no engine counters on "
                f"its legs; attach its step logs with --vs-log {name}=LOG (repeatable, globs as "
                "for the main logs), or take a record whose legs carry spec_drafts_proposed, "
                "spec_drafts_accepted and spec_drafted_request_steps"
            )
    except FoldError as error:
        raise placed(error, f"--vs {name}") from error
    return OurRun(name, path, record, tuple(logs), position)


def _leg_counters(record: ArmRecord) -> tuple:
    return () if record.counters is None else record.counters.legs
