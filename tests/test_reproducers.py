"""Inputs a differential fuzz campaign found to break the readers, each folded both ways.

Each reproducer is one or two lines (also kept as regression inputs of the fuzzer, under
``fuzz/regressions/steplog/``). For each: the native reader and the polars reference give the same
outcome, no figure is negative or wrapped, and nothing in the output grows with a value on a
line (the output's size is bounded by what the lines are, not by what they say).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from native_switch import native_switch
from strategies import ONE_SECOND_LEG as LEG

import fold.api
from fold import cli
from fold.api import fold_acceptance
from fold.errors import InputError, RefusedError
from fold.inputs.arm import arm_from_document
from fold.inputs.limits import MAX_STEP_TOKENS
from fold.inputs.reader import judge_line

T_NS = 1764450000000001000  # inside LEG's window


def line(n: int = 0, *, proposed: int = 7, accepted: int = 3, tail: str = "") -> bytes:
    """A writers'-layout line; ``tail`` goes before the closing brace (",key":value...)."""
    return (
        f'{{"v":1,"w":"5f0c1a2b3c4d5e6f","n":{n},"t_ns":{T_NS},"pid":4242,"seq":7,'
        f'"proposed":{proposed},"accepted":{accepted}{tail}}}\n'
    ).encode()


def both_ways(log: Path, **options: Any) -> Any:
    """The fold's JSON (or the error) from each reader; they must be the same."""
    found = []
    for native in (True, False):
        with native_switch(native):
            try:
                found.append(
                    fold_acceptance(arm_from_document([LEG]), [str(log)], **options).to_json()
                )
            except (InputError, RefusedError) as error:
                found.append((type(error).__name__, str(error)))
    assert found[0] == found[1]
    return found[0]


def numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, dict):
        return [x for item in value.values() for x in numbers(item)]
    if isinstance(value, list):
        return [x for item in value for x in numbers(item)]
    return []


# -- 1. a number no double holds, in a key the format does not know ----------------------------

HUGE = "1" + "0" * 250 + "e99"


@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("literal", [HUGE, "1e999", "-1e999", "9" * 400, "1" * 5000])
def test_a_huge_number_in_an_unknown_key_is_ignored(tmp_path: Path, literal: str, skip: bool):
    """FORMAT.md: unknown keys are accepted and ignored, whatever valid JSON they hold; JSON
    sets numbers no range. Both readers fold the line as if the key were not there."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0, tail=f',"x":{literal}') + line(1, tail=f',"y":[{literal},{{}}]'))
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(line(0) + line(1))
    document = both_ways(log, skip_bad_lines=skip, resamples=0)
    assert isinstance(document, dict), document
    expected = both_ways(plain, skip_bad_lines=skip, resamples=0)
    assert document["legs"][0]["proposed"] == 14 and document["legs"][0]["accepted"] == 6
    assert document["skipped_lines"] == 0
    assert document["legs"] == expected["legs"]


def test_a_huge_number_in_a_known_field_is_a_bad_line_both_ways(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0) + line(1).replace(b'"n":1', b'"n":1e999') + line(2))
    error = both_ways(log)
    assert error[0] == "InputError"
    assert "steps.jsonl:2: field 'n' a number beyond a double's range is not an integer" in error[1]
    skipped = both_ways(log, skip_bad_lines=True, resamples=0)
    assert skipped["skipped_lines"] == 1


def test_the_exact_parser_stays_strict_where_orjson_is():
    """Read again past orjson's number range, a line is still judged as strictly: no NaN, no
    unpaired surrogate, no bad UTF-8, whatever else the line holds."""
    for extra in ['"\\ud800"', "NaN", "Infinity", '"\\udc00x"']:
        raw = line(tail=f',"x":1e999,"y":{extra}').rstrip(b"\n")
        row, reason, _ = judge_line(raw)
        assert row is None and reason.startswith("not valid JSON"), extra
    row, _, _ = judge_line(line(tail=',"x":1e999,"y":"\\ud83d\\ude00"').rstrip(b"\n"))
    assert row is not None and row["proposed"] == 7
    bad_utf8 = line(tail=',"x":1e999,"y":"\xff"').rstrip(b"\n").replace(b"\xc3\xbf", b"\xff")
    assert judge_line(bad_utf8)[0] is None


# -- 2. figures that grow with a value ----------------------------------------------------------


@pytest.mark.parametrize("proposed", [2**31, 10**7, MAX_STEP_TOKENS + 1, 2**63 - 1])
def test_a_proposal_past_the_cap_is_refused_naming_the_line(tmp_path: Path, proposed: int):
    """A step proposing 2^31 tokens once built a histogram of 2^31 + 1 entries. FORMAT.md caps
    a step at 2^16 tokens: past it the line is refused, by file and line, skip or not."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0) + line(1, proposed=proposed, accepted=0) + line(2))
    for skip in (False, True):
        error = both_ways(log, skip_bad_lines=skip)
        assert error[0] == "RefusedError"
        assert error[1] == (
            f"{log}:2: 'proposed' {proposed} exceeds 65536, the most tokens one step may carry "
            "(FORMAT.md): the engine's instrumentation is miscounting; no acceptance can be "
            "computed from this log"
        )


def test_a_proposal_at_the_cap_folds_with_figures_bounded_by_it(tmp_path: Path):
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        line(0, proposed=MAX_STEP_TOKENS, accepted=MAX_STEP_TOKENS)
        + line(1, proposed=MAX_STEP_TOKENS, accepted=2)
    )
    document = both_ways(log, resamples=0)
    leg = document["legs"][0]
    assert len(leg["histogram"]) == MAX_STEP_TOKENS + 1
    assert len(leg["per_position"]) == MAX_STEP_TOKENS
    # By hand: one step accepted 2, one accepted all 2^16; positions 0 and 1 both steps.
    assert leg["histogram"][2] == 1 and leg["histogram"][MAX_STEP_TOKENS] == 1
    assert sum(leg["histogram"]) == 2
    assert leg["per_position"][:3] == [1.0, 1.0, 0.5] and leg["per_position"][-1] == 0.5
    assert len(orjson.dumps(document)) < 8 * 1024 * 1024


def test_a_run_of_one_value_prints_as_one_cell_or_row():
    from fold.present.table import position_cells, value_runs

    assert value_runs([]) == []
    assert value_runs([5, 0, 0, 0]) == [(0, 0, 5), (1, 1, 0), (2, 2, 0), (3, 3, 0)]
    assert value_runs([1, 0, 0, 0, 0, 2]) == [(0, 0, 1), (1, 4, 0), (5, 5, 2)]
    # a histogram of two steps, one accepting 1 token and one the cap: not 65,537 cells
    histogram = ["0", "1", *(["0"] * (MAX_STEP_TOKENS - 2)), "1"]
    assert position_cells(histogram) == f"0:0  1:1  2..{MAX_STEP_TOKENS - 1}:0  65536:1"


def test_a_run_of_ours_with_a_step_at_the_cap_compares_in_a_few_rows(tmp_path: Path):
    """Another run of ours (--vs-log) with one step accepting 65,536 tokens printed one row per
    position in the comparison's two position tables: 7.7 MB of table in two minutes, 6 MB of
    markdown. Past our own largest step (4 proposed, 3 accepted: positions 0..3, histogram
    0..4) the rows are equal ("not recorded" for ours) and print as one i..j row."""
    arm = tmp_path / "arm.json"
    arm.write_bytes(orjson.dumps([LEG]))
    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "theirs.jsonl"
    ours.write_bytes(line(0, proposed=4, accepted=3))
    theirs.write_bytes(line(0, proposed=MAX_STEP_TOKENS, accepted=MAX_STEP_TOKENS))
    command = [sys.executable, "-m", "fold.cli", str(arm), str(ours), "--vs", f"b={arm}",
               "--vs-log", f"b={theirs}", "--bootstrap", "0", "--quiet"]  # fmt: skip
    # the position tables of two runs are details on the terminal, always in the markdown
    for extra in (["--details"], ["--markdown", "-"]):
        done = subprocess.run([*command, *extra], capture_output=True, check=True, timeout=60)
        assert len(done.stdout) < 64 * 1024, len(done.stdout)
        text = " ".join(done.stdout.decode().replace("|", " ").split())
        # per position: ours 0..3 recorded, 4..65535 not, theirs all 100%; histogram: ours
        # 0..4, then 5..65535 where theirs has no step (0.0%), then 65536 where it has one
        assert f" 4..{MAX_STEP_TOKENS - 1} not recorded 100.0%" in text, text
        assert f" 5..{MAX_STEP_TOKENS - 1} not recorded 0.0%" in text, text
        assert f" {MAX_STEP_TOKENS} not recorded 100.0%" in text, text


# -- 3. sums that would wrap --------------------------------------------------------------------


@pytest.mark.parametrize("emitted", [2**63 - 1, 2**62, MAX_STEP_TOKENS + 1])
def test_emitted_past_the_cap_is_refused_never_wrapped(tmp_path: Path, emitted: int):
    """Two lines of one request with emitted = 2^63 - 1 once gave the leg emitted -2. A step
    emits no more than FORMAT.md's cap, so the first such line is refused by file and line
    and no sum of counts can pass 2^63."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0, tail=f',"emitted":{emitted}') + line(1, tail=f',"emitted":{emitted}'))
    for skip in (False, True):
        error = both_ways(log, skip_bad_lines=skip)
        assert error[0] == "RefusedError"
        assert error[1].startswith(f"{log}:1: 'emitted' {emitted} exceeds 65536, the most ")


def test_counts_at_the_cap_sum_exactly(tmp_path: Path):
    lines = [line(n, proposed=MAX_STEP_TOKENS, accepted=n, tail=f',"emitted":{MAX_STEP_TOKENS}')
             for n in range(50)]  # fmt: skip
    log = tmp_path / "steps.jsonl"
    log.write_bytes(b"".join(lines))
    document = both_ways(log, resamples=0)
    leg = document["legs"][0]
    assert (leg["proposed"], leg["accepted"], leg["emitted"]) == (
        50 * MAX_STEP_TOKENS,
        sum(range(50)),
        50 * MAX_STEP_TOKENS,
    )
    assert min(numbers(document)) >= 0


# -- arm records whose times no leg has ---------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "said"),
    [
        # milliseconds, not seconds: past 2262 in nanoseconds
        (1764450000000.0, 1764450001000.0, "field 'generate_start_unix' is 1764450000000.0, not "),
        (-1.0, 1764450001.0, "field 'generate_start_unix' is -1.0, not seconds since the epoch"),
        (1764450000.0, 9.3e9, "field 'generate_end_unix' is 9300000000.0, not seconds"),
        # 0 to 9.2e9 s fits in nanoseconds, but no leg lasts 291 years (time bins overflowed)
        (0.0, 9.2e9, "leg 0 lasts 106481 days from generate_start_unix to generate_end_unix"),
    ],
)
def test_leg_times_out_of_any_gates_range_are_named(tmp_path: Path, start, end, said):
    """Such legs once ended in an unexpected exception (a traceback before the command caught
    them), and the two readers differed; both now name the leg and field."""
    log = tmp_path / "steps.jsonl"
    log.write_bytes(line(0))
    arm = {**LEG, "generate_start_unix": start, "generate_end_unix": end}
    for native in (True, False):
        with native_switch(native), pytest.raises(InputError) as error:
            fold_acceptance(arm_from_document([arm]), [str(log)])
        assert said in str(error.value)


# -- 4. no traceback, whatever happens ----------------------------------------------------------


FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (MemoryError(), "fold-acceptance: error: ran out of memory"),
        (RuntimeError("a thing went wrong"), "unexpected RuntimeError: a thing went wrong"),
        (KeyError("legs"), "unexpected KeyError: 'legs'"),
        (ValueError(), "fold-acceptance: error: unexpected ValueError\n"),
    ],
)
def test_an_unexpected_exception_is_a_message_and_a_bug_report_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raised, said
):
    def fail(*_: Any, **__: Any) -> None:
        raise raised

    monkeypatch.setattr(fold.api, "fold_acceptance", fail)
    code = cli.main([str(FIXTURES / "our-arm.json"), str(FIXTURES / "steps.jsonl"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 2
    assert said in captured.err
    assert "this is a bug, please report it with the command line" in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert len(captured.err.strip().splitlines()) == 2


def test_a_closed_stdout_is_not_a_bug():
    """``fold-acceptance ... | head`` closes the pipe early: no traceback, no bug report. (The
    pipe's reading end is closed before the command starts, so its first write fails.)"""
    import os
    import subprocess
    import sys

    reading, writing = os.pipe()
    os.close(reading)
    command = [sys.executable, "-m", "fold.cli", str(FIXTURES / "our-arm.json"),
               str(FIXTURES / "steps.jsonl"), "--json", "-"]  # fmt: skip
    try:
        done = subprocess.run(command, stdout=writing, stderr=subprocess.PIPE, check=False)
    finally:
        os.close(writing)
    assert b"Traceback" not in done.stderr and b"this is a bug" not in done.stderr, done.stderr
    assert done.returncode == 0


def _harness() -> Any:
    """fuzz/differential.py, the fuzzer's check, imported from its file (it is no package)."""
    path = Path(__file__).parent.parent / "fuzz" / "differential.py"
    spec = importlib.util.spec_from_file_location("fuzz_differential", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUZZ = Path(__file__).parent.parent / "fuzz"


def test_regression_inputs_hold_these_reproducers():
    """The fuzzer's regression inputs hold the lines above, so every campaign starts at them."""
    texts = [path.read_bytes() for path in (FUZZ / "regressions" / "steplog").iterdir()]
    assert any(HUGE.encode() in text for text in texts)
    assert any(f'"proposed":{2**31}'.encode() in text for text in texts)
    assert any(text.count(f'"emitted":{2**63 - 1}'.encode()) == 2 for text in texts)


@pytest.mark.parametrize("directory", ["corpus", "regressions"])
def test_the_fuzzers_inputs_pass_its_check(tmp_path: Path, directory: str):
    harness = _harness()
    assert harness.MAX_STEP_TOKENS == MAX_STEP_TOKENS
    paths = sorted((FUZZ / directory / "steplog").iterdir())
    assert paths
    for path in paths:
        harness.check(path.read_bytes(), str(tmp_path))


def test_the_fuzzers_check_reports_what_it_is_for(tmp_path: Path, monkeypatch):
    """Each rule of the check fires: readers that differ, an unexpected exception, a list
    longer than the cap (here lowered to 4, below the seed's proposals of 7)."""
    harness = _harness()
    seed = (FUZZ / "corpus" / "steplog" / "writers-layout.jsonl").read_bytes()
    real = harness._command

    def differing(log: str, *, native: bool, skip: bool) -> tuple[int, bytes, str]:
        status, out, err = real(log, native=native, skip=skip)
        return (status, out + b" " if native else out, err)

    monkeypatch.setattr(harness, "_command", differing)
    with pytest.raises(harness.Finding, match="the readers differ"):
        harness.check(seed, str(tmp_path))
    monkeypatch.setattr(harness, "_command", real)
    monkeypatch.setattr(harness, "MAX_STEP_TOKENS", 4)
    with pytest.raises(harness.Finding, match="a histogram of 8 entries"):
        harness.check(seed, str(tmp_path))
    monkeypatch.setattr(harness, "MAX_STEP_TOKENS", MAX_STEP_TOKENS)

    def broken(*_: Any, **__: Any) -> None:
        raise ZeroDivisionError("x")

    monkeypatch.setattr(fold.api, "fold_acceptance", broken)
    with pytest.raises(harness.Finding, match="an unexpected exception"):
        harness.check(seed, str(tmp_path))


def test_the_fuzzers_line_mutations_never_fail_and_keep_literals():
    """A mutator that raises ends a campaign: any bytes in, bytes out; a line rewritten keeps
    its numbers as written (1e999 stays 1e999) and its escapes."""
    import random

    harness = _harness()
    rng = random.Random(5)
    inputs = [path.read_bytes() for path in sorted((FUZZ / "corpus" / "steplog").iterdir())]
    inputs += [b"", b"\n\n", b"\xff\xfe{", b'{"a":"\\ud800"}\n[1,2]\n{"\\ud83d":1}']
    for _ in range(2000):
        data = rng.choice(inputs)
        for _ in range(rng.randrange(1, 4)):
            data = harness.mutate_lines(data, rng)
        assert isinstance(data, bytes)
    line = b'{"x":1e999,"y":"\\ud800","z":[NaN,1' + b"0" * 30 + b',{"k":-0.0}]}'
    members = harness._members(line)
    assert harness._write(members, b"") == line
