"""Oracle arms (vLLM, SGLang, llama.cpp) read as the engines write them, into one unit.

``load_oracle(name, path)`` reads a file, tells the engine from its content
(:mod:`fold.inputs.oracles.detect`), and hands it to that engine's module
(:mod:`fold.inputs.oracles.registry`), which returns :class:`ArmFigures`: the figures, where each
came from, and the population its counters cover. The accepted inputs are listed in
``docs/oracles.md``. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import NamedTuple

from fold.errors import InputError, RefusedError
from fold.inputs.oracles.detect import detect, normalize_kind
from fold.inputs.oracles.figures import (
    OURS_KIND,
    ArmFigures,
    MatchedAs,
    arm_from_counts,
)
from fold.inputs.oracles.prometheus import parse_scrapes
from fold.inputs.oracles.registry import KINDS, reader
from fold.inputs.oracles.source import Run, load_oracle_file, parse_oracle_file
from fold.inputs.populations import (
    ALL_LEGS,
    INTERVAL,
    LAST_INTERVAL,
    POPULATIONS,
    REQUESTS,
    SINCE_START,
    WARM_LEGS,
)

__all__ = [
    "ALL_LEGS",
    "INTERVAL",
    "KINDS",
    "LAST_INTERVAL",
    "MATCHED",
    "OURS_KIND",
    "POPULATIONS",
    "REQUESTS",
    "SINCE_START",
    "WARM_LEGS",
    "ArmFigures",
    "MatchedAs",
    "VsSpec",
    "arm_from_counts",
    "detect_kind",
    "load_oracle",
    "load_oracle_arms",
    "normalize_kind",
    "parse_scrapes",
    "parse_vs",
    "parse_vs_spec",
    "read_oracle",
]

_NAME_RE = re.compile(r"[^\s:=]+")


MATCHED = "matched"


class VsSpec(NamedTuple):
    """One ``--vs``: the arm's name, its engine kind if given, its path, and ``matched`` when
    it is given as an arm run at our acceptance."""

    name: str
    kind: str | None
    path: str
    matched: MatchedAs | None = None


def parse_vs(text: str) -> VsSpec:
    """Split ``NAME=PATH`` or ``NAME:MODIFIERS=PATH``, MODIFIERS being an engine kind,
    ``matched`` or ``matched@BASE``, or a kind and one of those joined by ``+``
    (``vllm+matched``, ``matched@vllm+vllm``).

    The split is at the first ``=``, so the path may itself hold ``=`` or ``:``.
    """
    where = f"--vs {text!r}"
    head, sep, path = text.partition("=")
    if not sep or not path:
        raise InputError(
            f"{where}: expected NAME=PATH or NAME:KIND=PATH (KIND may be KIND+matched or "
            "matched), e.g. vllm=vllm-arm.json"
        )
    name, colon, modifiers = head.partition(":")
    if not _NAME_RE.fullmatch(name):
        raise InputError(
            f"{where}: the arm name {name!r} must be non-empty without spaces, ':' or '='"
        )
    if not colon:
        return VsSpec(name, None, path)
    kind = matched = None
    for part in modifiers.split("+"):
        word, at, base = part.strip().partition("@")
        if word.strip().lower() == MATCHED:
            if matched is not None:
                raise InputError(f"{where}: 'matched' is given twice")
            if at and not _NAME_RE.fullmatch(base):
                raise InputError(
                    f"{where}: matched@BASE names the --vs arm of the same engine's ordinary "
                    f"run; {base!r} is not an arm name"
                )
            matched = MatchedAs(base if at else None)
        elif kind is not None:
            raise InputError(f"{where}: two engine kinds ({kind}, {part!r}); give one")
        else:
            kind = normalize_kind(part, where=where)
    return VsSpec(name, kind, path, matched)


def parse_vs_spec(text: str) -> tuple[str, str | None, str]:
    """Split ``NAME=PATH`` or ``NAME:KIND=PATH`` into ``(name, kind or None, path)``; a
    matched arm's spec is :func:`parse_vs`'s."""
    spec = parse_vs(text)
    if spec.matched is not None:
        raise InputError(f"--vs {text!r}: a matched arm's spec is read by parse_vs")
    return spec.name, spec.kind, spec.path


def load_oracle(name: str, path: str | os.PathLike[str], kind: str | None = None) -> ArmFigures:
    """Read one oracle arm from ``path``; the kind is detected from the content unless given."""
    doc = load_oracle_file(path)
    return reader(detect(doc, kind), doc).read(name, doc)


_RUN_RE = re.compile(r"(?P<path>.+)#(?P<run>[1-9][0-9]*)")


def load_oracle_arms(
    name: str,
    path: str | os.PathLike[str],
    kind: str | None = None,
    matched: MatchedAs | None = None,
) -> list[ArmFigures]:
    """The arms of one ``--vs``: one, but for a file of appended benchmark runs (``vllm bench
    serve --append-result``, SGLang's ``bench_serving``) whose runs differ in workload (a
    sweep), which gives one arm per run, ``NAME#1``, ``NAME#2``, ...; ``PATH#N`` picks run N
    (an existing file of that name is read as it is). Runs of one workload are pooled, as
    :func:`load_oracle` pools them. ``matched`` marks every arm as run at our acceptance
    (:func:`claim_matched`)."""
    return [claim_matched(arm, matched, name) for arm in _oracle_arms(name, path, kind)]


def claim_matched(arm: ArmFigures, matched: MatchedAs | None, spec_name: str) -> ArmFigures:
    """The arm marked matched by the command line; refused when its own record says its run
    was not one (a speculative config without synthetic acceptance)."""
    if matched is None:
        return arm
    setting = arm.speculative
    if setting is not None and not setting.synthetic:
        raise RefusedError(
            f"--vs {spec_name}:matched: {setting.where} records speculative_config."
            f"rejection_sample_method = {setting.rejection_sample_method!r}: that run accepted "
            "what its drafter proposed, not a rate it was given; drop ':matched', or give the "
            "record of the run made with rejection_sample_method 'synthetic'"
        )
    if matched.base == arm.name or matched.base == spec_name:
        raise InputError(
            f"--vs {spec_name}:matched@{matched.base}: an arm is not its own ordinary run; name "
            "the --vs arm of the same engine run without a synthetic setting"
        )
    return dataclasses.replace(arm, matched_as=matched)


def _oracle_arms(name: str, path: str | os.PathLike[str], kind: str | None) -> list[ArmFigures]:
    path = os.fspath(path)
    chosen = None
    match = _RUN_RE.fullmatch(path)
    if match and not os.path.exists(path) and os.path.exists(match["path"]):
        path, chosen = match["path"], int(match["run"])
    doc = load_oracle_file(path)
    engine = reader(detect(doc, kind), doc)
    runs = engine.runs(doc) if hasattr(engine, "runs") else None
    if chosen is not None:
        if runs is None:
            raise InputError(
                f"{path}#{chosen}: #N picks one run of a file of appended benchmark results "
                f"(vllm bench serve --append-result, bench_serving); {path} is not one"
            )
        if chosen > len(runs):
            raise InputError(f"{path}#{chosen}: the file holds {len(runs)} run(s); pick 1 to "
                             f"{len(runs)}")  # fmt: skip
        return [_one_run(engine.read(name, runs[chosen - 1].doc), runs, chosen)]
    if runs is None or len({run.workload for run in runs}) < 2:
        return [engine.read(name, doc)]
    return [
        _one_run(engine.read(f"{name}#{number}", run.doc), runs, number)
        for number, run in enumerate(runs, start=1)
    ]


def _one_run(arm: ArmFigures, runs: list[Run], number: int) -> ArmFigures:
    """The arm of one run, saying which run of the file it is and the settings that tell it
    from the other runs."""
    run = runs[number - 1]
    differing = [
        f"{key}={value}"
        for place, (key, value) in enumerate(run.workload)
        if any(other.workload[place][1] != value for other in runs)
    ]
    which = f"run {number} of {len(runs)}"
    if differing:
        which += f" ({', '.join(differing)})"
    detail = f"{which}, {run.doc.where}"
    if arm.population_detail:
        detail += f": {arm.population_detail}"
    # The tok/s source names the run too: it is what a one-line summary (markdown) shows.
    sources = dict(arm.sources)
    if "tok_s" in sources and not sources["tok_s"].startswith("not recorded"):
        sources["tok_s"] += f" of {which}"
    return dataclasses.replace(arm, population_detail=detail, sources=sources)


def read_oracle(
    name: str, text: str, kind: str | None = None, *, where: str = "<input>"
) -> ArmFigures:
    """Like :func:`load_oracle`, from the text of the file."""
    doc = parse_oracle_file(text, where)
    return reader(detect(doc, kind), doc).read(name, doc)


def detect_kind(text: str, *, where: str = "<input>") -> str:
    """The engine kind a file's content shows: ``vllm``, ``sglang`` or ``llamacpp``."""
    return detect(parse_oracle_file(text, where))
