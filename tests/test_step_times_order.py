"""A partial fold's ``step_times``: one row per request, sorted by ``REQUEST_KEY``.

The bootstrap by output position takes its requests' order (and so its draws) from these rows
instead of sorting the keys again, so every path that makes or merges them must keep it: the
native pass, the polars reader, and block merges at any block size. The order is checked
against polars' own sort of the keys (nulls first), the order the bootstrap used to make.
"""

from __future__ import annotations

from hypothesis import event, given
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import fold_cases, scaled

from fold.errors import InputError, RefusedError
from fold.folding.accumulate import REQUEST_KEY
from fold.folding.log_fold import LogFold
from fold.inputs.arm import arm_from_document


def _keys_in_order(step_times) -> None:
    keys = step_times.select(REQUEST_KEY)
    assert not keys.is_duplicated().any(), "a request in two rows"
    assert keys.equals(keys.sort(REQUEST_KEY, nulls_last=False)), "rows out of key order"


@scaled(5)
@given(fold_cases(string_ids=True), st.booleans())
def test_every_path_keeps_a_row_per_request_in_key_order(tmp_path_factory, case, native):
    log = tmp_path_factory.mktemp("order") / "steps.jsonl"
    log.write_bytes(case.log.data())
    fold = LogFold(arm_from_document(case.document))
    try:
        with native_switch(native):
            fold.add_file(
                str(log), skip_bad_lines=case.skip_bad_lines, block_bytes=case.block_bytes
            )
    except (InputError, RefusedError):
        return
    step_times = fold.partial.step_times
    _keys_in_order(step_times)
    event(
        f"string ids: {step_times['sid'].is_not_null().any()}, both: "
        f"{step_times['sid'].is_not_null().any() and step_times['sid'].is_null().any()}"
    )


def test_string_and_integer_ids_of_several_writers_in_both_paths(tmp_path):
    """Integer ids (no string id) before string ids, string ids by their bytes, writers by
    their hex digits: the native pass's order is polars' sort of the keys."""
    from cadence_logs import T0_NS

    legs = [
        {
            "run": 1,
            "prompt_tokens": 8,
            "completion_tokens": 40,
            "secs": 1.0,
            "tok_s": 40.0,
            "finish_reason": "length",
            "generate_start_unix": T0_NS / 1e9,
            "generate_end_unix": T0_NS / 1e9 + 1.0,
        }
    ]
    lines = []
    ids = ['"b"', "3", '"a"', "1", '"é"', '"B"', "2"]
    written = dict.fromkeys(("00000000000000ff", "000000000000000a", "0000000000000100"), 0)
    for step in range(4):
        for w in written:
            for request in ids:
                t = T0_NS + 1_000_000 * (1 + step) + len(lines)
                lines.append(
                    f'{{"v":1,"w":"{w}","n":{written[w]},"t_ns":{t},"pid":7,"seq":{request},'
                    f'"proposed":3,"accepted":1}}'
                )
                written[w] += 1
    log = tmp_path / "steps.jsonl"
    log.write_text("\n".join(lines) + "\n")
    for native in (True, False):
        fold = LogFold(arm_from_document({"legs": legs}))
        with native_switch(native):
            fold.add_file(str(log), block_bytes=500)
        _keys_in_order(fold.partial.step_times)
        assert fold.partial.step_times.height == 3 * len(ids)
