"""Other runs of our own engine given with ``--vs`` (read by ``fold.inputs.vs_arms``), folded.

Another run of ours is folded exactly as the main one: the same warm predicate, window, stall
factor, prefill convention and resamples, through the same library call, so the same refusals
hold; every message it raises starts with ``--vs NAME:``. Without ``--vs-log`` it is folded from
its legs' own engine counters (``fold.folding.counter_fold``), as the main arm is without a log; a
record with neither is refused with what to add. When the two runs' legs pair
(``fold.compare.leg_pairs.pairing``) it is resampled with the main run's seed, so each resample
draws the same legs on both sides (a paired bootstrap); otherwise with the seed plus its place among
the ``--vs`` arms, a stream of its own. Either way its row is its standalone fold with that seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fold.compare.arms import Arm
from fold.compare.comparison import OURS, OURS_ALL, our_arm
from fold.compare.leg_pairs import pairing, require_pairing
from fold.errors import FoldError, placed
from fold.folding.log_fold import fold_acceptance
from fold.folding.warm import check_arm
from fold.inputs.arm import ArmRecord
from fold.inputs.oracles import ArmFigures
from fold.inputs.vs_arms import OurRun

TAKEN_NAMES = (OURS, OURS_ALL)
"""The comparison's own rows: no ``--vs`` arm may take their names
(``fold.inputs.vs_arms.read_vs_arms``'s ``taken``)."""


def fold_vs_arms(
    read: Sequence[ArmFigures | OurRun],
    *,
    main: ArmRecord,
    predicate: str,
    fold_options: dict[str, Any],
    paired: bool = False,
) -> list[ArmFigures | Arm]:
    """The ``--vs`` arms as the comparison takes them, in the order given: oracle figures as
    read, and every run of ours folded.

    ``fold_options`` are the main fold's keywords for :func:`fold.folding.log_fold.fold_acceptance`
    (its ``seed`` among them); ``paired`` refuses another run of ours whose legs do not pair."""
    arms: list[ArmFigures | Arm] = []
    main_warm = None
    for arm in read:
        if isinstance(arm, OurRun):
            if main_warm is None:
                main_warm = check_arm(main, predicate).warm_legs
            arms.append(_fold_run(arm, main, main_warm, predicate, fold_options, paired))
        else:
            arms.append(arm)
    return arms


def _fold_run(
    run: OurRun,
    main: ArmRecord,
    main_warm: Sequence[int],
    predicate: str,
    options: dict[str, Any],
    paired: bool,
) -> Arm:
    try:
        warm = check_arm(run.record, predicate).warm_legs
        found = pairing(main, run.record, main_warm, warm, run.name)
        if paired:
            require_pairing(found, run.name)
        seed = options["seed"] if found.paired else options["seed"] + run.position
        result = fold_acceptance(
            run.record, list(run.logs), predicate=predicate, **{**options, "seed": seed}
        )
    except FoldError as error:
        raise placed(error, f"--vs {run.name}") from error
    return our_arm(result, run.name, run.record)
