"""The warm-leg predicate: one definition, used by the throughput fold and the acceptance fold."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import polars as pl

from fold.errors import InputError, RefusedError
from fold.inputs.arm import ArmRecord
from fold.inputs.defaults import DEFAULT_PREDICATE
from fold.inputs.recorded_fold import RecordedFold, disagreements


def warm_mask(legs: pl.DataFrame, predicate: str = DEFAULT_PREDICATE) -> pl.Series:
    """Which legs are warm under ``predicate``, a polars SQL expression over the leg fields."""
    try:
        expression = pl.sql_expr(predicate)
        # with_columns: a constant predicate ('true') holds for every leg, not for one row
        mask = legs.with_columns(expression.alias("warm"))["warm"]
    except Exception as error:  # polars raises several kinds for a bad SQL expression
        fields = ", ".join(column for column in legs.columns if column != "index")
        raise InputError(
            f"--warm {predicate!r} is not a predicate over the leg fields "
            f"({str(error).splitlines()[0]}). "
            f"Fields: {fields}"
        ) from error
    if mask.dtype != pl.Boolean or mask.len() != legs.height:
        raise InputError(
            f"--warm {predicate!r} gives {mask.dtype} per leg, not true/false; "
            "write a condition such as 'run > 1'"
        )
    if mask.null_count():
        first = legs.filter(mask.is_null())["index"][0]
        raise InputError(
            f"--warm {predicate!r} is null for leg {first} (a field it uses is missing there); "
            "use a predicate over fields every leg has"
        )
    return mask


def throughput_fold(tok_s: list[float]) -> float | None:
    """The gate's throughput fold: the median tok/s of the selected legs."""
    return statistics.median(tok_s) if tok_s else None


@dataclass(frozen=True)
class ThroughputCheck:
    predicate: str
    warm_legs: list[int]
    output_throughput_tok_s: float | None


def check_against_record(
    legs: pl.DataFrame,
    mask: pl.Series,
    predicate: str,
    recorded_throughput_tok_s: float | None,
    recorded_warm_legs: int | list[int] | None,
    recorded_cold_legs_discarded: int | None,
    where: str = "<arm record>",
) -> ThroughputCheck:
    """Recompute the gate's throughput fold with the predicate; refuse if it disagrees.

    If the recorded figures do not come out of the predicate, the throughput axis and the
    acceptance axis would describe different legs, and no comparison of them would mean anything.
    ``where`` (the record's path) starts each refusal.
    """
    warm = legs.filter(mask)
    warm_indices = warm["index"].to_list()
    throughput = throughput_fold(warm["tok_s"].to_list())
    recorded = RecordedFold(
        recorded_throughput_tok_s,
        "metrics.output_throughput_tok_s",
        recorded_warm_legs,
        recorded_cold_legs_discarded,
    )
    problems = disagreements(
        recorded,
        warm_indices,
        legs.height,
        throughput,
        rule=repr(predicate),
        chosen=f"the legs selected by {predicate!r}",
    )
    if problems:
        raise RefusedError(
            f"{where}: the recorded throughput fold does not come out of the warm predicate: "
            + "; ".join(problems)
            + ". Pass the predicate the gate used (--warm) so both axes fold the same legs"
        )
    if not warm_indices:
        raise RefusedError(
            f"{where}: no leg is warm under {predicate!r}: there is nothing to fold. "
            "Check the record's 'run' fields or pass --warm"
        )
    return ThroughputCheck(predicate, warm_indices, throughput)


def check_arm(arm: ArmRecord, predicate: str = DEFAULT_PREDICATE) -> ThroughputCheck:
    """The warm legs of ``arm`` under ``predicate``, refused unless they reproduce its record."""
    return check_against_record(
        arm.legs,
        warm_mask(arm.legs, predicate),
        predicate,
        arm.recorded_throughput_tok_s,
        arm.recorded_warm_legs,
        arm.recorded_cold_legs_discarded,
        arm.path,
    )
