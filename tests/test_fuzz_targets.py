"""The fuzz targets (``fuzz/targets.py``): every regression input passes its target's check,
each rule of the check fires, and the cases the trace and the counters were found with are
held."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import fold.api

FUZZ = Path(__file__).parent.parent / "fuzz"


def _module(name: str) -> Any:
    """A module of fuzz/ (no package), imported from its file; its siblings import alike."""
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    if name != "fuzz":
        return importlib.import_module(name)
    # not "fuzz": the name of the directory too
    spec = importlib.util.spec_from_file_location("fuzz_driver", FUZZ / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def driver() -> Any:
    return _module("fuzz")


def test_every_input_the_project_reads_has_a_target(driver):
    assert set(driver.TARGETS) == {"steplog", "trace", "arm", "oracle-vllm", "oracle-sglang",
                                   "oracle-llamacpp", "oracle-vllm-requests", "vs-log",
                                   "ledger", "follow", "sums"}  # fmt: skip
    for name, target in driver.TARGETS.items():
        seeds = sorted((FUZZ / "corpus" / name).iterdir())
        assert seeds, name
        assert all(len(path.read_bytes()) <= target.max_len for path in seeds), name
        assert (FUZZ / "dicts" / target.dictionary).is_file(), name


@pytest.mark.timed_documents
def test_the_regression_inputs_pass_their_targets_checks(driver, tmp_path: Path):
    """Every target's but the step log's (tests/test_reproducers.py replays those)."""
    pairs = driver.inputs([str(FUZZ / "regressions")])
    assert {target.name for target, _ in pairs} >= {"steplog", "vs-log"}
    for target, path in pairs:
        if target.name == "steplog":
            continue
        target.check(path.read_bytes(), str(tmp_path))


def _held(directory: str) -> list[bytes]:
    return [path.read_bytes() for path in (FUZZ / directory).rglob("*")
            if path.is_file() and path.suffix != ".md"]  # fmt: skip


def test_the_inputs_hold_the_cases_the_trace_and_the_counters_were_found_with():
    """Each case a campaign over traces and records found, fixed or passing
    (corpus): k = 2^31 over a record without counters, req and k of 2^63, 2^64 and 10^40, and
    legs carrying counters of 2^62, 2^61, 2^60."""
    traces = _held("corpus/trace") + _held("regressions/trace")
    for key in ("k", "req"):
        for value in (2**63, 2**64, 10**40):
            field = re.compile(rf"^\[SPECTRACE\] .*\b{key}={value}\s".encode(), re.MULTILINE)
            assert any(field.search(text) for text in traces), (key, value)
    assert any(b" k=2147483648 " in text for text in traces)
    records = []
    for text in _held("corpus/arm") + _held("regressions/arm"):
        try:
            record = json.loads(text)
        except ValueError:
            continue  # a regression input need not be JSON
        if isinstance(record, dict) and isinstance(record.get("legs"), list):
            records.append(record)
    big = {"spec_drafts_proposed": 2**62, "spec_drafts_accepted": 2**61,
           "spec_drafted_request_steps": 2**60}  # fmt: skip
    carrying = [
        record
        for record in records
        if any(isinstance(leg, dict) and big.items() <= leg.items() for leg in record["legs"])
    ]
    assert any(record.get("spec_acceptance") is None for record in carrying)
    assert not any(big.keys() & leg.keys() for leg in json.loads(
        (FUZZ / "context" / "trace-bare.json").read_bytes())["legs"])  # fmt: skip


# -- the rules of the check ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def harness() -> Any:
    return _module("harness")


def _outcome(harness: Any, status: int = 0, out: bytes = b"", err: str = "", seconds=0.1):
    return harness.Outcome(("ARM", "LOG"), status, out, err, seconds)


def test_each_rule_of_the_judge_fires(harness):
    ok = _outcome(harness, 1, err="fold-acceptance: refused: /x/prompt.log:3: acc=9 exceeds k=7")
    harness.judge(ok, fuzzed="/x/prompt.log", input_bytes=10)
    harness.judge(_outcome(harness, 2, err="leg 3 field 'secs' must be"), fuzzed="/x/a",
                  input_bytes=10)  # fmt: skip
    cases = [
        (_outcome(harness, 3), "exit status 3"),
        (_outcome(harness, 2, err="error: unexpected X\nfold-acceptance: this is a bug, please"),
         "an unexpected exception"),
        (_outcome(harness, 0, err="Traceback (most recent call last):\n"),
         "an unexpected exception"),
        (_outcome(harness, 1, err="fold-acceptance: refused: the numbers disagree"),
         "names no place"),
        (_outcome(harness, 0, seconds=harness.SECONDS + 1), "s of processor time"),
        (_outcome(harness, 0, out=b"x" * (harness.OUTPUT_BASE + 64 * 10 + 1)),
         "bytes of output from 10 bytes"),
    ]  # fmt: skip
    for outcome, said in cases:
        with pytest.raises(harness.Finding, match=said):
            harness.judge(outcome, fuzzed="/x/prompt.log", input_bytes=10)


def test_the_lists_of_a_document_are_held_to_the_cap(harness):
    cap = harness.MAX_STEP_TOKENS
    harness.check_lists({"legs": [{"histogram": [0] * (cap + 1), "steps": 3}]}, 100)
    with pytest.raises(harness.Finding, match=f"a list of {cap + 2} entries"):
        harness.check_lists({"comparison": {"rows": [{"x": [1] * (cap + 2)}]}}, 100)
    with pytest.raises(harness.Finding, match="accepted = -2"):
        harness.check_lists({"warm": {"accepted": -2}}, 100)
    with pytest.raises(harness.Finding, match="a negative histogram count"):
        harness.check_lists({"all": {"histogram": [1, -1]}}, 100)


def test_a_target_reports_an_unexpected_exception(driver, tmp_path: Path, monkeypatch):
    def broken(*_: Any, **__: Any) -> None:
        raise ZeroDivisionError("x")

    monkeypatch.setattr(fold.api, "fold_acceptance", broken)
    seed = (FUZZ / "corpus" / "trace" / "prompt.log").read_bytes()
    with pytest.raises(AssertionError, match="unexpected ZeroDivisionError"):
        driver.TARGETS["trace"].check(seed, str(tmp_path))


def test_the_mutators_never_fail(driver):
    """A mutator that raises ends a campaign: any bytes in, bytes out, for every target."""
    rng = random.Random(11)
    odd = [b"", b"\n", b"\xff{[", b'{"legs":[1]}', b'{"a":1}\n{"b":[2]}\n{x', b"[SPECTRACE] k=",
           b'{"legs":[{"run":2,"tok_s":1' + b"0" * 400 + b'}]}']  # fmt: skip
    for target in driver.TARGETS.values():
        seeds = [path.read_bytes() for path in sorted((FUZZ / "corpus" / target.name).iterdir())]
        for _ in range(300):
            data = rng.choice(seeds + odd)
            for _ in range(rng.randrange(1, 4)):
                data = target.mutate(data, rng)
                assert isinstance(data, bytes)


def test_a_repaired_record_agrees_with_its_legs():
    """The arm mutator's repair writes the summaries the gate would: here by hand, the warm
    legs (run > 1) of fuzz/context/trace-counters.json with one leg's tok_s changed."""
    mutate = _module("mutate")
    record = json.loads((FUZZ / "context" / "trace-counters.json").read_bytes())
    record["legs"][2]["tok_s"] = 30.0  # runs 2..5: 22.084, 30.0, 22.222, 22.016
    record["legs"][3]["spec_drafts_accepted"] = 60
    repaired = json.loads(mutate.repair_arm(json.dumps(record).encode()))
    assert repaired["metrics"]["output_throughput_tok_s"] == (22.084 + 22.222) / 2
    block = repaired["spec_acceptance"]
    assert (block["warm_legs"], block["drafted_request_steps"]) == (4, 36)
    assert (block["drafts_proposed"], block["drafts_accepted"]) == (4 * 63, 3 * 54 + 60)
    assert block["per_leg"][2]["drafts_accepted"] == 60
    assert block["mean_acceptance_length"] == (3 * 54 + 60 + 36) / 36
    assert repaired["warm_legs"] == 4 and repaired["cold_legs_discarded"] == 1


def test_the_step_log_target_holds_the_readers_durations_equal(tmp_path: Path, monkeypatch):
    """The durations the JSON does not show are compared through the library, both ways: a
    seed with them passes, and readers that disagree on them, or a negative sum, are found."""
    differential = _module("differential")
    seed = (FUZZ / "corpus" / "steplog" / "durations.jsonl").read_bytes()
    assert differential._may_carry_durations(seed)
    plain = (FUZZ / "corpus" / "steplog" / "writers-layout.jsonl").read_bytes()
    assert not differential._may_carry_durations(plain)
    differential.check(seed, str(tmp_path))
    found = differential._durations(str(FUZZ / "corpus" / "steplog" / "durations.jsonl"),
                                    native=True, skip=False)  # fmt: skip
    assert found is not None and found.leg(1).verify_ns == 388001 * 2

    def disagreeing(log: str, *, native: bool, skip: bool) -> Any:
        return found if native else None

    monkeypatch.setattr(differential, "_durations", disagreeing)
    with pytest.raises(differential.Finding, match="step durations differ"):
        differential.check(seed, str(tmp_path))
    negative = type(found)(
        legs=found.legs,
        requests={0: ({"w": "a", "seq": 1, "draft_ns": -1},)},
    )
    monkeypatch.setattr(differential, "_durations", lambda *_, **__: negative)
    with pytest.raises(differential.Finding, match="a negative duration sum"):
        differential.check(seed, str(tmp_path))


def test_the_sums_target_holds_a_fold_to_its_rows_and_its_mutations_reach_the_checks(
    tmp_path: Path,
):
    """A fold whose legs' S, P and A are not its rows' sums is a finding; and the mutations of
    a host's file are refused for many reasons, none of them an unexpected error, while some
    still fold."""
    harness = _module("harness")
    sums_target = _module("sums_target")
    from fold.api import fold_from_sums
    from fold.errors import FoldError

    seed = (FUZZ / "corpus" / "sums" / "host-a.parquet").read_bytes()
    outcome = harness.Outcome(("--from-sums",), 0, b"", "", 0.1)
    with pytest.raises(AssertionError, match="leg 0 folds S, P, A"):
        sums_target._agrees({"legs": [{"index": 0, "steps": 9, "proposed": 9, "accepted": 9}]},
                            seed, outcome)  # fmt: skip
    other = tmp_path / "host-b.parquet"
    other.write_bytes((FUZZ / "corpus" / "sums" / "host-b.parquet").read_bytes())
    rng = random.Random(5)
    reasons: dict[str, int] = {}
    for index in range(150):
        data = sums_target.mutate(seed, rng)
        path = tmp_path / f"m{index}.parquet"
        path.write_bytes(data)
        try:
            fold_from_sums(harness.MAIN_ARM, [str(path), str(other)], resamples=0)
            reasons["folded"] = reasons.get("folded", 0) + 1
        except FoldError as error:
            words = re.sub(r"^\S+: (row \d+ \([^)]*\): )?", "", str(error))[:40]
            reasons[words] = reasons.get(words, 0) + 1
    assert reasons.get("folded", 0) >= 5, reasons
    assert len(reasons) >= 12, reasons
