"""Stage 2 of the bootstrap (``fold.folding.uncertainty``): the requests of each drawn leg
redrawn with replacement, and each per-request column summed over the redrawn requests.

A leg drawn n times in one selection needs n independent copies, so each leg is redrawn as
many times as the selection that draws it most often, once for every selection. Each leg has a
stream of its own, and the draws are counter-based (``request_draws``): blocks, threads and the
extension's fused draws (``fold.folding.native.resample_sums``) never change them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from fold.folding import native
from fold.inputs.leg_sums import Leg

# Where numpy makes the stage-2 draws (float columns, or no extension), it makes this many
# indices at a time, so a leg with very many requests does not hold all its draws at once.
# The draws are counter-based (``request_draws``): blocks never change them.
_DRAW_BLOCK = 1 << 21
# Drawn indices are gathered and summed this many at a time (see ``_row_sums``).
_GATHER_BLOCK = 1 << 18
# The extension's draws and sums and numpy's release the GIL, so legs are redrawn on this
# many threads, once there are enough draws to pay for them. Each leg has its own stream:
# threads never change the draws.
_WORKERS = min(4, os.cpu_count() or 1)
_THREADS_FROM_DRAWS = 1 << 21
_FUSED_COLUMNS = 16  # the most columns fold._native.resample_sums takes at once


def request_columns(legs: Sequence[Leg]) -> list[str]:
    names: set[str] = set()
    for leg in legs:
        names.update(leg.requests)
    return sorted(names)


@dataclass(frozen=True)
class Pools:
    offsets: np.ndarray  # leg j's copies start here in every column
    sums: dict[str, np.ndarray]


def stage_two_pools(
    legs: Sequence[Leg],
    picked_legs: Mapping[str, np.ndarray],
    columns: list[str],
    streams: Sequence[np.random.SeedSequence],
) -> Pools:
    """Per column, the concatenated stage-2 sums: leg j's copies start at ``offsets[j]``.

    Leg j needs as many independent copies as the selection that draws it most often.
    """
    copies = np.zeros(len(legs), dtype=np.int64)
    for picked in picked_legs.values():
        if picked.size:
            copies = np.maximum(copies, np.bincount(picked.ravel(), minlength=len(legs)))

    def leg_sums(position: int) -> dict[str, np.ndarray]:
        return _leg_copies(legs[position], int(copies[position]), columns, streams[position])

    draws = sum(int(copies[j]) * request_count(leg) for j, leg in enumerate(legs))
    if draws < _THREADS_FROM_DRAWS:
        per_leg = [leg_sums(position) for position in range(len(legs))]
    else:
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            per_leg = list(pool.map(leg_sums, range(len(legs))))
    offsets = np.concatenate([[0], np.cumsum(copies)[:-1]]).astype(np.int64)
    return Pools(
        offsets,
        {
            column: np.concatenate([sums[column] for sums in per_leg]) if per_leg else np.zeros(0)
            for column in columns
        },
    )


def _leg_copies(
    leg: Leg, count: int, columns: list[str], stream: np.random.SeedSequence
) -> dict[str, np.ndarray]:
    """``count`` stage-2 resamples of one leg: each column's sum over its redrawn requests."""
    present = [column for column in columns if column in leg.requests]
    sizes = {len(leg.requests[column]) for column in present}
    if len(sizes) > 1:
        raise ValueError("a leg's per-request columns differ in length")
    requests = sizes.pop() if sizes else 0
    sums = {column: np.full(count, np.nan) for column in columns if column not in present}
    values = {column: _as_array(leg.requests[column]) for column in present}
    if requests <= 1:
        # Nothing to redraw: every copy is the leg itself.
        for column in present:
            sums[column] = np.full(count, float(values[column].sum()))
        return sums
    key = int(stream.generate_state(1, np.uint64)[0])
    # Integer columns are drawn and summed by the extension in one pass, with no array of
    # draws; otherwise (floats, or no extension) numpy makes the same draws a block at a time
    # and gathers each column (the reference the tests hold the extension to).
    fused = [column for column in present if values[column].dtype.kind == "i"]
    fused = fused if native.available() else []
    # A column equal to another (a request's only bucket of position is its S, P and A) is
    # summed once: the same draws give it the same sums.
    twins = _twins(fused, values)
    drawn_once = [column for column in fused if column not in twins]
    # The extension sums at most _FUSED_COLUMNS columns a pass: more go in several passes.
    for first in range(0, len(drawn_once), _FUSED_COLUMNS):
        part = drawn_once[first : first + _FUSED_COLUMNS]
        packed = np.column_stack([values[column] for column in part]).astype(np.int64)
        drawn_sums = np.empty((count, len(part)), dtype=np.int64)
        native.resample_sums(packed, key, 0, drawn_sums)
        for position, column in enumerate(part):
            sums[column] = drawn_sums[:, position].astype(np.float64)
    for column, twin in twins.items():
        sums[column] = sums[twin]
    rest = [column for column in present if column not in fused]
    parts: dict[str, list[np.ndarray]] = {column: [] for column in rest}
    per_block = max(1, _DRAW_BLOCK // requests)
    for start in range(0, count if rest else 0, per_block):
        rows = min(per_block, count - start)
        index = request_draws(key, start, rows, requests)
        for column in rest:
            parts[column].append(_row_sums(values[column], index))
    for column in rest:
        sums[column] = (
            np.concatenate(parts[column]).astype(np.float64) if parts[column] else np.zeros(0)
        )
    return sums


def _twins(columns: list[str], values: Mapping[str, np.ndarray]) -> dict[str, str]:
    """Each column equal, value for value, to an earlier one: that one's name. Only columns of
    the same sum are compared."""
    first_of: dict[int, list[str]] = {}
    twins: dict[str, str] = {}
    for column in columns:
        total = int(values[column].sum(dtype=np.int64))
        found = first_of.setdefault(total, [])
        twin = next(
            (other for other in found if np.array_equal(values[other], values[column])), None
        )
        if twin is None:
            found.append(column)
        else:
            twins[column] = twin
    return twins


_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))
_LOW_HALF = np.uint64(0xFFFFFFFF)


def request_draws(key: int, first_row: int, rows: int, requests: int) -> np.ndarray:
    """Rows ``first_row`` ... of a leg's stage-2 draws (``rows`` x ``requests`` indices into
    its requests), from the leg's stream ``key``.

    Draw i (row after row) is SplitMix64's output after i + 1 steps from the key, scaled to
    [0, requests) by the high half of its 128-bit product with ``requests`` (a bias of at most
    requests / 2^64). Counter-based, so any block is drawn on its own, and the extension's
    fused draws (``fold.folding.native.resample_sums``) are these very numbers.
    """
    if not 0 < requests < 2**32:
        raise ValueError("a leg's requests must number from 1 to 2^32 - 1")
    first = first_row * requests
    z = np.arange(first + 1, first + rows * requests + 1, dtype=np.uint64)
    z *= _GAMMA
    z += np.uint64(key)
    for shift, multiplier in zip((30, 27), _MIX, strict=True):
        z ^= z >> np.uint64(shift)
        z *= multiplier
    z ^= z >> np.uint64(31)
    # The high 64 bits of z * requests (requests < 2^32), from z's 32-bit halves.
    count = np.uint64(requests)
    high = ((z & _LOW_HALF) * count) >> np.uint64(32)
    high += (z >> np.uint64(32)) * count
    high >>= np.uint64(32)
    return high.astype(np.int32).reshape(rows, requests)


def _row_sums(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index].sum(axis=1)``, gathered a slice of rows at a time: a slice's gathered
    values stay in cache where a whole block's would not (several times faster for floats),
    and each row's sum is computed exactly as from the whole block."""
    rows = max(1, _GATHER_BLOCK // max(1, index.shape[1]))
    return np.concatenate(
        [
            np.take(values, index[start : start + rows]).sum(axis=1)
            for start in range(0, index.shape[0], rows)
        ]
    )


def _as_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        # int32 halves the gather's memory traffic; numpy sums it in int64, so sums stay exact.
        small = array.size == 0 or (array.min() > -(2**31) and array.max() < 2**31)
        return array.astype(np.int32 if small else np.int64)
    return array.astype(np.float64)


def occurrence_rank(picked: np.ndarray) -> np.ndarray:
    """For each drawn leg, how many earlier draws (row-major) drew the same leg."""
    flat = picked.ravel()
    order = np.argsort(flat, kind="stable")
    sorted_legs = flat[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_legs)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, flat.size]))
    rank = np.empty_like(flat)
    rank[order] = np.arange(flat.size) - group_start
    return rank.reshape(picked.shape)


def request_count(leg: Leg) -> int:
    return max((len(values) for values in leg.requests.values()), default=0)
