"""The ledger folder's fuzz target (``fuzz/targets.py`` lists it): one file of a ledger
folder another process wrote, replaced by the input, read by every ledger command and kept
into."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import harness
import mutate as mutations
from harness import MAIN_ARM, MAIN_LOG, QUIET

# -- a ledger folder -----------------------------------------------------------------------------

# The files of a ledger folder another process wrote, one of which the input replaces: the
# input's first byte picks the slot, the rest is the file. ``@ID@`` in the input stands for
# the folder's ledger id (the seeds' LEDGER files carry it, so they match their folder).
LEDGER_SLOTS = (
    "LEDGER",
    "digests/DIGEST",
    "runs/ledger_id=@ID@/run-2.parquet",
    "labels/ledger_id=@ID@/run-2.parquet",
    "inputs/ledger_id=@ID@/run-2.parquet",
    "figures/ledger_id=@ID@/run-2.parquet",
    "figures/ledger_id=@ID@/.run-4.parquet.0123abcd.tmp",
)
_LEDGER_CONTEXT: dict[str, Any] = {}


def ledger_context() -> tuple[Path, str, str]:
    """A ledger folder of three runs of ``fuzz/arm.json`` (labelled), made once a process:
    its path, its id and the digest of run 2 (the file the digest slot replaces)."""
    if not _LEDGER_CONTEXT:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="fuzz-ledger-")) / "gates"
        # a fixed time kept, so the runs' files (and the seeds made from them) are the same
        # bytes each time
        os.environ.setdefault("FOLD_ACCEPTANCE_KEPT_AT", "2026-12-01T09:00:00Z")
        for seed in (1, 2, 3):
            arguments = [MAIN_ARM, MAIN_LOG, "--seed", str(seed), "--bootstrap", "16",
                         "--quiet", "--ledger", f"{folder}/", "--label", f"n={seed}"]  # fmt: skip
            outcome = harness.run(arguments)
            if outcome.status != 0:
                raise RuntimeError(f"the ledger target's context: {outcome.stderr}")
        identity = json.loads((folder / "LEDGER").read_bytes())
        digests = sorted(p for p in (folder / "digests").iterdir() if p.read_text() == "2")
        _LEDGER_CONTEXT.update(folder=folder, id=identity["id"], digest=digests[0].name)
    return _LEDGER_CONTEXT["folder"], _LEDGER_CONTEXT["id"], _LEDGER_CONTEXT["digest"]


def check(data: bytes, directory: str) -> None:
    """The input is one file of a ledger folder (its first byte picks which: LEDGER, a
    digest, one of run 2's four files, a temporary file), in a copy of a folder of three
    runs: the listing, ``--figure``, ``--check`` and ``--export`` read it, then the main arm
    is kept into it and kept again."""
    import shutil

    context, ledger_id, digest = ledger_context()
    folder = Path(directory) / "gates"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(context, folder)
    slot = LEDGER_SLOTS[data[0] % len(LEDGER_SLOTS)] if data else LEDGER_SLOTS[0]
    fuzzed = folder / slot.replace("@ID@", ledger_id).replace("DIGEST", digest)
    fuzzed.write_bytes(data[1:].replace(b"@ID@", ledger_id.encode()))
    size = len(data)
    export = Path(directory) / "export"
    commands = (
        ["ledger", str(folder), "--json", "-"],
        ["ledger", str(folder), "--figure", "A/P"],
        ["ledger", str(folder), "--check", "A/P", "--check", "per_position:1", "--markdown", "-"],
        ["ledger", str(folder), "--export", str(export)],
        [MAIN_ARM, MAIN_LOG, "--seed", "2", "--bootstrap", "16", "--quiet", "--ledger",
         str(folder)],
        [MAIN_ARM, MAIN_LOG, "--seed", "9", *QUIET, "--ledger", str(folder)],
    )  # fmt: skip
    for arguments in commands:
        outcome = harness.run(arguments)
        if "--check" in arguments and outcome.status == 3:
            # 3 is --check's documented "could not decide" (docs/command.md), not a failure
            outcome = dataclasses.replace(outcome, status=0)
        harness.judge(outcome, fuzzed=str(fuzzed), input_bytes=size)


def mutate(data: bytes, rng: Any) -> bytes:
    head, body = data[:1] or b"\x00", data[1:]
    if rng.randrange(5) == 0:
        head = bytes([rng.randrange(len(LEDGER_SLOTS))])
    if body.lstrip().startswith(b"{"):
        body = mutations.json_value(body, rng, _LEDGER_KEYS)
    elif body.startswith(b"PAR1") and body:
        cut = rng.randrange(len(body))
        choice = rng.randrange(3)
        if choice == 0:  # cut short, as a writer killed mid-write leaves it
            body = body[:cut]
        elif choice == 1:  # a byte flipped
            body = body[:cut] + bytes([body[cut] ^ (1 << rng.randrange(8))]) + body[cut + 1 :]
        else:  # a run of bytes zeroed, as a torn page of a shared mount
            body = body[:cut] + bytes(min(64, len(body) - cut)) + body[cut + 64 :]
    else:
        body = mutations.numbers(body, rng)
    return head + body


_LEDGER_KEYS = ["kind", "schema", "id", "created_at", "created_by"]
