"""Invariants of the fold that must hold for every arm record and step log.

Hypothesis draws arm records (legs apart, adjacent, overlapping, empty; labelled or not) and step
logs (several writers, lost lines, torn fragments, other writers' layouts, bad lines, steps on
window edges +-1 ns) and each property is checked against the plain reference fold in
``tests/reference.py``.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import assume, event, given, note
from hypothesis import strategies as st
from reference import (
    ReferenceBadInput,
    ReferenceRefused,
    arm_legs,
    attribute,
    differences,
    parse_step,
    read_file,
    reference_fold,
    with_request_rows,
    without_intervals,
)
from strategies import (
    BASE_US,
    PREDICATES,
    FoldCase,
    arm_documents,
    canonical_line,
    fold_cases,
    legs_of,
    scaled,
)

from fold.api import LogFold, fold_acceptance
from fold.errors import InputError, RefusedError
from fold.inputs.arm import arm_from_document

# Figures that depend on which files the lines were in, not on the lines.
PER_FILE_KEYS = ("files", "skipped_examples")


@contextmanager
def written(files: list[bytes]) -> Iterator[list[str]]:
    """The contents written to files in a fresh directory; yields their paths."""
    with tempfile.TemporaryDirectory(prefix="fold-props-") as directory:
        paths = []
        for number, data in enumerate(files):
            path = os.path.join(directory, f"part{number}.jsonl")
            with open(path, "wb") as handle:
                handle.write(data)
            paths.append(path)
        yield paths


def library_fold(case: FoldCase, paths: list[str], **overrides: Any) -> dict[str, Any]:
    options = {
        "predicate": case.predicate.sql,
        "window_steps": case.window_steps,
        "skip_bad_lines": case.skip_bad_lines,
        "block_bytes": case.block_bytes,
        "resamples": 0,
        **overrides,
    }
    result = fold_acceptance(arm_from_document(case.document), paths, **options)
    return without_intervals(with_request_rows(result.to_json(), result))


def expected_fold(case: FoldCase, paths: list[str], files: list[bytes]) -> dict[str, Any]:
    return reference_fold(
        case.document,
        case.predicate.holds,
        case.predicate.sql,
        list(zip(paths, files, strict=True)),
        window_steps=case.window_steps,
        skip_bad_lines=case.skip_bad_lines,
    )


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    """The output without what names files: the figures that must not depend on the split."""
    return {key: value for key, value in document.items() if key not in PER_FILE_KEYS}


def with_example_places(document: dict[str, Any]) -> dict[str, Any]:
    """The output with skipped examples reduced to (path, line): the reason is free text."""
    return {
        **document,
        "skipped_examples": [
            {"path": example["path"], "line": example["line"]}
            for example in document["skipped_examples"]
        ],
    }


def fold_or_skip(case: FoldCase, files: list[bytes]) -> tuple[dict, dict]:
    """(library output, reference output, paths) for a case both fold; other cases are not
    drawn again (their refusal is checked by test_fold_equals_reference)."""
    with written(files) as paths:
        try:
            expected = expected_fold(case, paths, files)
        except (ReferenceRefused, ReferenceBadInput):
            assume(False)
        return library_fold(case, paths), expected


def assert_same(expected: Any, actual: Any) -> None:
    problems = differences(expected, actual)
    assert not problems, "\n".join(problems[:20])


# ----------------------------------------------------------------------------------------------
# 1. Equality with the reference
# ----------------------------------------------------------------------------------------------


@scaled(3)
@given(fold_cases(consistent=None))
def test_fold_equals_reference(case: FoldCase) -> None:
    """Every per-leg, pooled, per-file and per-writer figure equals the reference's; inputs the
    reference refuses (or rejects) are refused (or rejected) by the library too."""
    files = [case.log.data()]
    with written(files) as paths:
        try:
            expected = expected_fold(case, paths, files)
        except ReferenceRefused as reason:
            note(f"reference refuses: {reason}")
            event("refused")
            with pytest.raises(RefusedError):
                library_fold(case, paths)
            return
        except ReferenceBadInput as reason:
            note(f"reference rejects: {reason}")
            event("rejected")
            with pytest.raises(InputError):
                library_fold(case, paths)
            return
        actual = library_fold(case, paths)
    event("folded")
    event(f"has ambiguous steps: {expected['ambiguous_steps'] > 0}")
    event(f"has torn lines: {expected['torn_lines'] > 0}")
    assert_same(expected, with_example_places(actual))


# ----------------------------------------------------------------------------------------------
# 2. Order does not matter; 3. split = whole
# ----------------------------------------------------------------------------------------------


@given(fold_cases(), st.data())
def test_order_and_files_do_not_matter(case: FoldCase, data: st.DataObject) -> None:
    """Shuffling the lines and spreading them over several files changes no figure."""
    whole, _ = fold_or_skip(case, [case.log.data()])
    lines = data.draw(st.permutations(case.log.lines), label="shuffled lines")
    parts = data.draw(st.integers(1, 4), label="files")
    owner = data.draw(
        st.lists(st.integers(0, parts - 1), min_size=len(lines), max_size=len(lines)),
        label="file of each line",
    )
    files = [b"".join(line + b"\n" for line, o in zip(lines, owner, strict=True) if o == part)
             for part in range(parts)]  # fmt: skip
    files[data.draw(st.integers(0, parts - 1), label="file with the torn tail")] += case.log.tail
    with written(files) as paths:
        shuffled = library_fold(case, paths)
    assert_same(comparable(whole), comparable(shuffled))


@given(fold_cases(), st.data())
def test_split_equals_whole(case: FoldCase, data: st.DataObject) -> None:
    """A log cut at any line into two files, folded together or folded apart and merged
    (``LogFold.merge``, i.e. ``PartialFold.merge``), or read in other block sizes, folds as
    the whole."""
    whole_data = case.log.data()
    whole, _ = fold_or_skip(case, [whole_data])
    cut = data.draw(st.integers(0, len(case.log.lines)), label="cut after line")
    first = b"".join(line + b"\n" for line in case.log.lines[:cut])
    second = b"".join(line + b"\n" for line in case.log.lines[cut:]) + case.log.tail
    block_bytes = data.draw(st.sampled_from([64, 200, 1000, 32 * 1024 * 1024]), label="block")
    with written([first, second]) as paths:
        together = library_fold(case, paths, block_bytes=block_bytes)
        arm = arm_from_document(case.document)
        halves = [LogFold(arm), LogFold(arm)]
        for fold, path in zip(halves, paths, strict=True):
            fold.add_file(path, skip_bad_lines=case.skip_bad_lines, block_bytes=block_bytes)
        merged = (
            halves[1].merge(halves[0]).result(case.predicate.sql, case.window_steps, resamples=0)
        )
    assert_same(comparable(whole), comparable(together))
    merged_json = with_request_rows(merged.to_json(), merged)
    assert_same(comparable(whole), comparable(without_intervals(merged_json)))
    # The per-file rows of the parts add up to the whole's one row.
    for key in ("lines", "attributed", "unattributed", "ambiguous", "torn", "skipped"):
        assert sum(row[key] for row in together["files"]) == whole["files"][0][key], key


# ----------------------------------------------------------------------------------------------
# 4. Pooled rates; 5. bounds
# ----------------------------------------------------------------------------------------------


def _between(value: float | None, rates: list[float]) -> None:
    if not rates:
        assert value is None
        return
    assert value is not None
    slack = 1e-12 * max(1.0, abs(value))
    assert min(rates) - slack <= value <= max(rates) + slack, (value, rates)


def _padded(per_position: list[float], length: int) -> list[float]:
    return per_position + [0.0] * (length - len(per_position))


@given(fold_cases())
def test_pooled_rates_are_ratios_of_sums_between_the_legs(case: FoldCase) -> None:
    result, _ = fold_or_skip(case, [case.log.data()])
    for pool_name in ("warm", "all"):
        pool = result[pool_name]
        legs = [result["legs"][index] for index in pool["legs"]]
        s = sum(leg["steps"] for leg in legs)
        p = sum(leg["proposed"] for leg in legs)
        a = sum(leg["accepted"] for leg in legs)
        assert (pool["steps"], pool["proposed"], pool["accepted"]) == (s, p, a)
        assert pool["accept_rate"] == (a / p if p else None)
        assert pool["mean_acceptance_length"] == (1 + a / s if s else None)
        drafted = [leg for leg in legs if leg["steps"]]
        for name in ("accept_rate", "mean_acceptance_length", "completion_tokens_per_step"):
            _between(pool[name], [leg[name] for leg in drafted if leg[name] is not None])
        _between(
            pool["step_rate"], [leg["step_rate"] for leg in legs if leg["step_rate"] is not None]
        )
        width = len(pool["per_position"])
        for position in range(width):
            _between(
                pool["per_position"][position],
                [_padded(leg["per_position"], width)[position] for leg in drafted],
            )
        histogram = [0] * len(pool["histogram"])
        for leg in legs:
            for accepted, count in enumerate(leg["histogram"]):
                histogram[accepted] += count
        assert pool["histogram"] == histogram


def _check_bounds(figures: dict[str, Any], max_proposed: int) -> None:
    s, a = figures["steps"], figures["accepted"]
    rate, length = figures["accept_rate"], figures["mean_acceptance_length"]
    if figures["proposed"]:
        assert 0 <= rate <= 1
    else:
        assert rate is None
    if s:
        assert 1 <= length <= 1 + max_proposed
    else:
        assert length is None
        assert figures["per_position"] == [] and figures["histogram"] == []
        assert figures["per_position_of_proposed"] == []
        return
    positions, histogram = figures["per_position"], figures["histogram"]
    assert len(histogram) == max_proposed + 1 and len(positions) == max_proposed
    # Of the steps that drafted position i: some step drafted every position below the largest
    # proposal, and not counting the steps that did not draft it can only raise the share.
    of_proposed = figures["per_position_of_proposed"]
    assert len(of_proposed) == max_proposed and None not in of_proposed
    assert all(share <= rate <= 1 for share, rate in zip(positions, of_proposed, strict=True))
    assert of_proposed[0] == positions[0]  # every drafted step drafted position 0
    assert all(later <= earlier for earlier, later in itertools.pairwise(positions))
    assert all(0 <= share <= 1 for share in positions)
    assert positions[0] == (s - histogram[0]) / s  # the share of steps that accepted >= 1
    assert sum(histogram) == s
    assert sum(j * count for j, count in enumerate(histogram)) == a


@given(fold_cases())
def test_bounds(case: FoldCase) -> None:
    result, _ = fold_or_skip(case, [case.log.data()])
    legs = arm_legs(case.document)
    steps = read_file("log", case.log.data(), skip_bad_lines=True).steps
    largest: dict[int, int] = {}
    for step in steps:
        _, index = attribute(step, legs)
        if index is not None and step.proposed:
            largest[index] = max(largest.get(index, 0), step.proposed)
    for leg in result["legs"]:
        _check_bounds(leg, largest.get(leg["index"], 0))
    for pool_name in ("warm", "all"):
        pool = result[pool_name]
        _check_bounds(pool, max((largest.get(i, 0) for i in pool["legs"]), default=0))


@given(fold_cases())
def test_one_proposal_in_a_leg_makes_both_per_position_rates_equal(case: FoldCase) -> None:
    """A leg whose drafted steps all propose the same k has the same rate at every position
    over S and over the steps that drafted it, exactly; with varying proposals they differ."""
    result, _ = fold_or_skip(case, [case.log.data()])
    legs = arm_legs(case.document)
    proposals: dict[int, set[int]] = {}
    for step in read_file("log", case.log.data(), skip_bad_lines=True).steps:
        _, index = attribute(step, legs)
        if index is not None and step.proposed:
            proposals.setdefault(index, set()).add(step.proposed)
    for leg in result["legs"]:
        if len(proposals.get(leg["index"], ())) == 1:
            event("a leg with one proposal")
            assert leg["per_position_of_proposed"] == leg["per_position"]
        elif leg["per_position_of_proposed"] != leg["per_position"]:
            event("a leg where the two rates differ")


# ----------------------------------------------------------------------------------------------
# 6. Conservation
# ----------------------------------------------------------------------------------------------


@given(fold_cases())
def test_every_line_is_counted_once(case: FoldCase) -> None:
    """Each newline-ended line is a step (attributed to one leg, unattributed or ambiguous) or
    skipped; torn fragments are counted apart; lost lines are the gaps in each writer's n."""
    data = case.log.data()
    result, expected = fold_or_skip(case, [data])
    (row,) = result["files"]
    assert row["lines"] + row["skipped"] == data.count(b"\n")
    assert row["attributed"] + row["unattributed"] + row["ambiguous"] == row["lines"]
    assert sum(leg["lines"] for leg in result["legs"]) == row["attributed"]
    assert sum(writer["lines"] for writer in result["writers"]) == row["lines"]
    assert row["skipped"] == case.log.bad_lines == result["skipped_lines"]
    glued = sum(
        1 for line in case.log.lines if parse_step(line) is None and line.rfind(b'{"v":') > 0
    )
    assert row["torn"] == glued + (1 if case.log.tail else 0) == result["torn_lines"]
    issued = {}
    for value in case.log.rows:
        issued[value["w"]] = max(issued.get(value["w"], -1), value["n"])
    for writer in result["writers"]:
        written_here = sum(1 for value in case.log.rows if value["w"] == writer["w"])
        assert writer["lines"] == written_here
        assert writer["lost"] == issued[writer["w"]] + 1 - written_here
    assert result["unattributed_steps"] == expected["unattributed_steps"]
    assert result["ambiguous_steps"] == expected["ambiguous_steps"]


# ----------------------------------------------------------------------------------------------
# 7. One population
# ----------------------------------------------------------------------------------------------


@given(st.sampled_from(PREDICATES), st.data())
def test_warm_legs_are_the_throughput_folds_legs(predicate, data: st.DataObject) -> None:
    """The acceptance fold's warm legs are exactly the legs whose median tok/s the throughput
    fold takes, for every predicate; a record whose throughput fold used other legs is refused."""
    consistent = data.draw(st.booleans(), label="record agrees with the predicate")
    document = data.draw(arm_documents(predicate, consistent=consistent), label="arm")
    legs = legs_of(document)
    warm = [index for index, leg in enumerate(legs) if predicate.holds(leg)]
    # One step with a draft in the middle of every leg's window, labelled as the leg.
    arm = arm_from_document(document)
    lines = []
    for index, leg in enumerate(arm.legs.iter_rows(named=True)):
        middle = (leg["start_ns"] + leg["end_ns"]) // 2
        lines.append(canonical_line({
            "v": 1, "w": "00000000000000aa", "n": index, "t_ns": middle, "pid": 1, "seq": index,
            "proposed": 3, "accepted": 1, "leg": leg["leg"],
        }))  # fmt: skip
    with written([b"".join(line + b"\n" for line in lines)]) as paths:
        try:
            expected = reference_fold(
                document, predicate.holds, predicate.sql, [(paths[0], b"".join(lines))]
            )
        except ReferenceRefused:
            expected = None
        if not consistent or not warm:
            # (lines, not whole lines: the reference must refuse before reading the log)
            with pytest.raises(RefusedError):
                fold_acceptance(arm, paths, predicate=predicate.sql)
            assert expected is None
            return
        try:
            result = fold_acceptance(arm, paths, predicate=predicate.sql).to_json()
        except RefusedError:
            # Overlapping windows can leave a warm leg's only step ambiguous.
            assume(False)
    assert result["warm"]["legs"] == warm
    assert [leg["index"] for leg in result["legs"] if leg["warm"]] == warm
    throughput = result["warm"]["output_throughput_tok_s"]
    tok_s = sorted(legs[index]["tok_s"] for index in warm)
    middle = len(tok_s) // 2
    assert throughput == (
        tok_s[middle] if len(tok_s) % 2 else (tok_s[middle - 1] + tok_s[middle]) / 2
    )
    recorded = (document.get("metrics") or {}) if isinstance(document, dict) else {}
    if "output_throughput_tok_s" in recorded:
        assert math.isclose(throughput, recorded["output_throughput_tok_s"], rel_tol=1e-9)


# ----------------------------------------------------------------------------------------------
# 8. Monotonicity
# ----------------------------------------------------------------------------------------------


@given(fold_cases(), st.data())
def test_a_fully_accepted_step_never_lowers_a_legs_rate(case: FoldCase, data: st.DataObject):
    """Appending a step that accepted all its drafts never lowers its leg's accept_rate, and one
    that accepted none never raises it."""
    before, _ = fold_or_skip(case, [case.log.data()])
    legs = arm_legs(case.document)
    placed = [
        (step, index)
        for step in read_file("log", case.log.data(), skip_bad_lines=True).steps
        if (index := attribute(step, legs)[1]) is not None and before["legs"][index]["proposed"]
    ]
    assume(placed)
    step, index = data.draw(st.sampled_from(placed), label="step whose place is reused")
    proposed = data.draw(st.integers(1, 8), label="proposed")
    full = data.draw(st.booleans(), label="accepted everything")
    writer = next(f"{value:016x}" for value in range(1, 10) if f"{value:016x}" not in
                  {row["w"] for row in case.log.rows})  # fmt: skip
    line = canonical_line({
        "v": 1, "w": writer, "n": 0, "t_ns": step.t_ns, "pid": 1, "seq": 99,
        "proposed": proposed, "accepted": proposed if full else 0, "leg": step.label,
    })  # fmt: skip
    with written([case.log.data(), line + b"\n"]) as two:
        after = library_fold(case, two)
    old, new = before["legs"][index]["accept_rate"], after["legs"][index]["accept_rate"]
    assert after["legs"][index]["steps"] == before["legs"][index]["steps"] + 1
    if full:
        assert new >= old
    else:
        assert new <= old
    for other in range(len(legs)):
        if other != index:
            assert after["legs"][other]["accept_rate"] == before["legs"][other]["accept_rate"]


# ----------------------------------------------------------------------------------------------
# 9. Attribution factors multiply back to the throughput ratio
# ----------------------------------------------------------------------------------------------


positive = st.floats(0.01, 1e5, allow_nan=False, allow_infinity=False)


@given(fold_cases(), positive, st.floats(1, 9, allow_nan=False), st.sampled_from([0, 0.02, 0.5]))
def test_gap_factors_multiply_back_to_the_ratio(case, oracle_tok_s, oracle_length, tolerance):
    """acceptance factor x speed factor == ours tok/s / oracle tok/s, for the fold's own figures;
    the two shares of the log-gap sum to 1."""
    from fold.compare.gap import attribute_gap
    from fold.inputs.oracles import ArmFigures

    result, _ = fold_or_skip(case, [case.log.data()])
    warm = result["warm"]
    ours = ArmFigures(
        name="ours",
        kind="ours",
        output_throughput_tok_s=warm["output_throughput_tok_s"],
        steps=warm["steps"],
        proposed=warm["proposed"],
        accepted=warm["accepted"],
        accept_rate=warm["accept_rate"],
        mean_acceptance_length=warm["mean_acceptance_length"],
    )
    oracle = ArmFigures(
        name="oracle",
        kind="vllm",
        output_throughput_tok_s=oracle_tok_s,
        mean_acceptance_length=oracle_length,
    )
    gap = attribute_gap(ours, oracle, tolerance)
    ratio = ours.output_throughput_tok_s / oracle_tok_s
    assert math.isclose(gap.ratio, ratio, rel_tol=1e-12)
    assert math.isclose(gap.acceptance_factor, warm["mean_acceptance_length"] / oracle_length)
    assert math.isclose(gap.acceptance_factor * gap.speed_factor, ratio, rel_tol=1e-12)
    if gap.acceptance_share is not None:
        assert math.isclose(gap.acceptance_share + gap.speed_share, 1, rel_tol=1e-9)


def test_generated_arm_times_survive_the_seconds_round_trip() -> None:
    """The generators rely on microsecond epoch times surviving float seconds exactly."""
    for offset in (0, 1, 999_999, 123_456_789):
        us = BASE_US + offset
        assert round((us / 1e6) * 1_000_000) == us
