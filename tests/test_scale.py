"""The streaming scan of a whole file folds exactly as the block reader does, or declines."""

from __future__ import annotations

import random

import pytest

import fold.api
from fold.accumulate import fold_file
from fold.api import fold_acceptance
from fold.arm import arm_from_document
from fold.attribute import leg_windows
from fold.steplog import format_line

BASE_S = 1_800_000_000
NS = 1_000_000_000


def record(legs: int = 4):
    return arm_from_document(
        {
            "legs": [
                {
                    "run": index + 1,
                    "finish_reason": "length",
                    "prompt_tokens": 5,
                    "completion_tokens": 100,
                    "secs": 1.0,
                    "tok_s": 100.0,
                    "generate_start_unix": BASE_S + 2 * index,
                    "generate_end_unix": BASE_S + 2 * index + 1,
                }
                for index in range(legs)
            ]
        },
        "arm.json",
    )


def lines(count: int, seed: int, *, labels: bool, emitted: bool) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        proposed = rng.choice([0, 3, 5, 7])
        accepted = rng.randint(0, proposed)
        out.append(
            format_line(
                writer_id=f"{rng.choice([0xAB, 0xCD]):016x}",
                n=n,
                t_ns=BASE_S * NS + rng.randrange(9 * NS),
                pid=rng.choice([11, 12]),
                seq=rng.randrange(30),
                proposed=proposed,
                accepted=accepted,
                emitted=accepted + 1 if emitted and rng.random() < 0.9 else None,
                leg=rng.choice(["warm", "x:y}", "α β", None]) if labels else None,
            )
        )
    return out


def block_fold(arm, paths, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(fold.api, "fold_file", lambda *args, **kwargs: None)
        return fold_acceptance(arm, paths).to_json()


@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("emitted", [False, True])
def test_streaming_scan_equals_the_block_reader(tmp_path, monkeypatch, labels, emitted):
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(lines(5000, 3, labels=labels, emitted=emitted)))
    arm = record()
    assert fold_file(str(path), leg_windows(arm.legs), arm.legs) is not None
    assert fold_acceptance(arm, [str(path)]).to_json() == block_fold(arm, [str(path)], monkeypatch)


@pytest.mark.parametrize(
    "tail",
    [
        b'{"v":1,"w":"00000000000000ab","n":9',  # torn last line
        b'{"w":"00000000000000ab","v":1,"n":9,"t_ns":1,"pid":1,"seq":1,"proposed":1,'
        b'"accepted":0}\n',  # another key order
        b'{"v":1,"w":"00000000000000ab","n":9,"t_ns":1,"pid":1,"seq":1,"proposed":1,'
        b'"accepted":0,"leg":"a\\"b"}\n',  # an escape
        b"\n",  # a blank line (skipped with a count)
        b'{"v":1,"w":"00000000000000ab","n":9,"t_ns":1,"pid":1,"seq":1,"proposed":1,'
        b'"accepted":0,"leg":"a,b"}\n',  # a comma in a label
    ],
)
def test_streaming_scan_declines_other_shapes(tmp_path, monkeypatch, tail):
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(lines(3000, 5, labels=False, emitted=True)) + tail)
    arm = record()
    assert fold_file(str(path), leg_windows(arm.legs), arm.legs) is None
    folded = fold.api.LogFold(arm)
    folded.add_file(str(path), skip_bad_lines=True)
    with monkeypatch.context() as patch:
        patch.setattr(fold.api, "fold_file", lambda *args, **kwargs: None)
        by_blocks = fold.api.LogFold(arm)
        by_blocks.add_file(str(path), skip_bad_lines=True)
    assert folded.result().to_json() == by_blocks.result().to_json()


def test_progress_reports_the_file_size_once(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_bytes(b"".join(lines(3000, 7, labels=False, emitted=True)))
    reported: list[int] = []
    fold_acceptance(record(), [str(path)], progress=reported.append)
    assert sum(reported) == path.stat().st_size
