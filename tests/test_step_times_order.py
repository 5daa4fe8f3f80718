"""A partial fold's ``step_times``: one row per request, sorted by ``REQUEST_KEY``.

The bootstrap by output position takes its requests' order (and so its draws) from these rows
instead of sorting the keys again, so every path that makes or merges them must keep it: the
native pass, the polars reader, and block merges at any block size. The order is checked
against polars' own sort of the keys (nulls first), the order the bootstrap used to make.
"""

from __future__ import annotations

import polars as pl
from hypothesis import event, given
from hypothesis import strategies as st
from native_switch import native_switch
from strategies import fold_cases, scaled

from fold.errors import InputError, RefusedError
from fold.folding.accumulate import (
    LINE_LISTS,
    PER_REQUEST_SCHEMA,
    REQUEST_KEY,
    assemble,
    empty_table,
)
from fold.folding.log_fold import LogFold
from fold.folding.step_intervals import encode
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
    # The requests' sums are the same requests in the same rows: the native pass's are a
    # slice of its rows, not sorted again.
    assert fold.partial.requests.select(REQUEST_KEY).equals(step_times.select(REQUEST_KEY))
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


def test_requests_given_out_of_key_order_are_sorted_not_sliced():
    """``assemble`` slices the requests in legs off the front only when they are there in key
    order; rows in any other order (a leg-less row first, keys descending) come out sorted."""
    rows = pl.DataFrame(
        {
            "leg": [None, 1, 0, 0],
            "w": ["a", "b", "b", "a"],
            "seq": [9, 2, 5, 5],
            "sid": [None, None, None, None],
            "lines": [1, 2, 3, 4],
        }
    )
    per_request = rows.with_columns(
        pl.lit(0).alias(name)
        for name in PER_REQUEST_SCHEMA
        if name not in rows.columns and name not in LINE_LISTS
    ).cast({name: dtype for name, dtype in PER_REQUEST_SCHEMA.items() if name not in LINE_LISTS})
    in_legs = per_request.filter(pl.col("leg").is_not_null())
    step_times = encode(
        in_legs.select(REQUEST_KEY)
        .sort(REQUEST_KEY)
        .with_columns(pl.lit([0], dtype=pl.List(pl.Int64)).alias("t_ns"))
    )
    empty = {name: empty_table(name) for name in ("histogram", "bins", "files")}
    partial = assemble(per_request, step_times=step_times, **empty)
    requests = partial.requests.select("leg", "w", "seq", "lines").rows()
    assert requests == [(0, "a", 5, 4), (0, "b", 5, 3), (1, "b", 2, 2)]
