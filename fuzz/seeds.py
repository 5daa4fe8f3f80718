"""Write the fuzz targets' fixed inputs (``fuzz/context/``) and seed corpora
(``fuzz/corpus/<target>/``) from the project's fixtures, in the formats as the engines write
them: ``python fuzz/seeds.py`` (the same bytes every time; the step-log seeds under
``fuzz/corpus/steplog/`` are written by hand and left alone).

The fixtures that are too big for a fuzz input (the real vLLM server's 100 kB scrapes and
logs) are cut to the lines the readers use, each kept byte for byte as the engine wrote it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CONTEXT = ROOT / "fuzz" / "context"
CORPUS = ROOT / "fuzz" / "corpus"
COUNTERS = ("spec_drafted_request_steps", "spec_drafts_proposed", "spec_drafts_accepted")
PROMPT = 1  # fixtures/vllmcpp's prompt 1: 9 steps a run, the shortest trace


def canonical(document: Any) -> bytes:
    """As vllm.cpp's gate writes a record: sorted keys, no spaces, a final newline."""
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def one_prompt_arm(counters: bool) -> dict:
    """fixtures/vllmcpp's record cut to one prompt's five legs, its summaries recomputed as
    the gate computes them; without counters as the gate wrote records before it had them
    (no spec_* on the legs, spec_acceptance null)."""
    record = json.loads((FIXTURES / "vllmcpp" / "our-arm.json").read_bytes())
    repeat = record["workload"]["repeat"]
    legs = record["legs"][PROMPT * repeat : (PROMPT + 1) * repeat]
    warm = [leg for leg in legs if leg["run"] > 1]
    record.update(
        legs=legs,
        prompts=[record["prompts"][PROMPT]],
        warm_legs=len(warm),
        cold_legs_discarded=len(legs) - len(warm),
        metrics={"output_throughput_tok_s": statistics.median(leg["tok_s"] for leg in warm)},
        workload={**record["workload"], "num_prompts": 1},
    )
    if not counters:
        record["legs"] = [{k: v for k, v in leg.items() if k not in COUNTERS} for leg in legs]
        record["spec_acceptance"] = None
        return record
    block = record["spec_acceptance"]
    per_leg = block["per_leg"][PROMPT * len(warm) : (PROMPT + 1) * len(warm)]
    steps = sum(leg["spec_drafted_request_steps"] for leg in warm)
    proposed = sum(leg["spec_drafts_proposed"] for leg in warm)
    accepted = sum(leg["spec_drafts_accepted"] for leg in warm)
    record["spec_acceptance"] = {
        **block,
        "warm_legs": len(warm),
        "drafted_request_steps": steps,
        "drafts_proposed": proposed,
        "drafts_accepted": accepted,
        "accept_rate": accepted / proposed,
        "mean_acceptance_length": (accepted + steps) / steps,
        "per_leg": per_leg,
    }
    return record


def cut_prometheus(text: str, keep: tuple[str, ...]) -> str:
    """The lines of the families named in ``keep``, their HELP and TYPE comments included, in
    file order (a second scrape stays a second scrape: its comments come again)."""
    return "".join(
        line for line in text.splitlines(keepends=True) if any(name in line for name in keep)
    )


def cut_log(text: str, keep: str, others: int = 3) -> str:
    """The first few lines of a log and every line holding ``keep``."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[:others] + [line for line in lines[others:] if keep in line])


def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def copy(source: Path, path: Path) -> None:
    write(path, source.read_bytes())


def main() -> None:
    # -- fixed inputs ------------------------------------------------------------------------
    write(CONTEXT / "trace-counters.json", canonical(one_prompt_arm(counters=True)))
    write(CONTEXT / "trace-bare.json", canonical(one_prompt_arm(counters=False)))
    copy(CORPUS / "steplog" / "writers-layout.jsonl", CONTEXT / "steps.jsonl")

    # -- the engine trace: one vllm-cli process's stderr ---------------------------------------
    trace = (FIXTURES / "vllmcpp" / "stderr" / f"prompt-{PROMPT}.log").read_bytes()
    write(CORPUS / "trace" / "prompt.log", trace)
    write(CORPUS / "trace" / "no-final-newline.log", trace.rstrip(b"\n"))
    write(CORPUS / "trace" / "crlf.log", trace.replace(b"\n", b"\r\n"))
    steps = trace.split(b"\n")
    spaced = [line.replace(b" k=", b"  k=", 1) for line in steps]
    write(CORPUS / "trace" / "spaced-fields.log", b"\n".join(spaced))
    warned = []
    for number, line in enumerate(steps):
        warned.append(line)
        if number % 7 == 3:
            warned.append(b"[WARN] kv cache: 96% of blocks in use")
    write(CORPUS / "trace" / "interleaved-warnings.log", b"\n".join(warned))
    first_leg = steps[: steps.index(next(s for s in steps if s.startswith(b"vllm-cli: run=1")))]
    write(CORPUS / "trace" / "steps-only.log", b"\n".join(first_leg) + b"\n")

    # -- arm records -----------------------------------------------------------------------------
    arms = CORPUS / "arm"
    write(arms / "counters.json", canonical(one_prompt_arm(counters=True)))
    write(arms / "bare.json", canonical(one_prompt_arm(counters=False)))
    copy(ROOT / "fuzz" / "arm.json", arms / "labelled.json")
    copy(FIXTURES / "vllmcpp" / "our-arm.json", arms / "vllmcpp.json")
    copy(FIXTURES / "gate-example" / "our-arm.json", arms / "gate-example.json")
    copy(FIXTURES / "ours-vs-ours" / "before" / "our-arm.json", arms / "toy-gate.json")
    copy(FIXTURES / "oracles" / "vllm-real" / "ours" / "our-arm.json",
                    arms / "llama-server.json")  # fmt: skip
    bare_list = one_prompt_arm(counters=False)["legs"]
    write(arms / "legs-list.json", json.dumps(bare_list, indent=2) + "\n")

    # -- oracle files, by the engine that writes them ----------------------------------------
    oracles = FIXTURES / "oracles"
    for kind in ("vllm", "sglang", "llamacpp"):
        for path in sorted(oracles.glob(f"{kind}-*")):
            if path.is_file():
                copy(path, CORPUS / f"oracle-{kind}" / path.name)
    real = oracles / "vllm-real"
    spec = ("vllm:spec_decode", "vllm:generation_tokens", "vllm:request_success")
    for name in ("metrics-last.prom", "metrics-warm.prom"):
        text = (real / "serve" / name).read_text()
        write(CORPUS / "oracle-vllm" / f"real-{name}", cut_prometheus(text, spec))
    for name in ("bench.json", "bench-append.json"):
        copy(real / "serve" / name, CORPUS / "oracle-vllm" / f"real-{name}")
    copy(real / "offline" / "vllm-arm.json", CORPUS / "oracle-vllm" / "real-arm.json")
    for path in sorted((oracles / "vllm-matched").glob("*.json")):
        copy(path, CORPUS / "oracle-vllm" / f"matched-{path.name}")
    for name, path in (("server", real / "serve" / "server.log"),
                       ("engine", real / "offline" / "engine.log")):  # fmt: skip
        write(CORPUS / "oracle-vllm" / f"real-{name}.log",
              cut_log(path.read_text(), "SpecDecoding metrics"))  # fmt: skip
    ours = real / "ours"
    write(CORPUS / "oracle-llamacpp" / "real-metrics.prom",
          cut_prometheus((ours / "metrics.prom").read_text(), ("llamacpp:",)))  # fmt: skip
    first = (ours / "completions.jsonl").read_text().splitlines(keepends=True)[:3]
    write(CORPUS / "oracle-llamacpp" / "real-completions.jsonl", "".join(first))

    # -- vLLM's per-request metrics: the recorded run and the hand-made forms --------------------
    requests = oracles / "vllm-requests"
    for path in sorted(requests.glob("*.jsonl")) + sorted(requests.glob("*.txt")):
        copy(path, CORPUS / "oracle-vllm-requests" / path.name)
    copy(requests / "offline" / "requests.jsonl", CORPUS / "oracle-vllm-requests" / "offline.jsonl")
    lines = (requests / "serve" / "requests.jsonl").read_text().splitlines(keepends=True)
    write(CORPUS / "oracle-vllm-requests" / "served-legs.jsonl", "".join(lines[:6]))
    lines = (requests / "serve" / "completions.jsonl").read_text().splitlines(keepends=True)
    write(CORPUS / "oracle-vllm-requests" / "served.jsonl", "".join(lines[:6]))

    # -- another run of ours: its step logs -------------------------------------------------------
    for path in sorted((CORPUS / "steplog").iterdir()):
        copy(path, CORPUS / "vs-log" / path.name)

    # -- a ledger folder's files: LEDGER (its id as @ID@), run 2's digest and files ------------
    ledger_seeds()

    # -- a host's sums file: the main log's two hosts, one with a request held whole -------------
    import sums_target

    for name, data in sums_target.host_files().items():
        write(CORPUS / "sums" / f"{name}.parquet", data)


def ledger_seeds() -> None:
    """Each slot of the ledger target with the file the target's own folder holds there (the
    Parquet files' bytes carry the time they were kept, so they change when rewritten)."""
    import ledger_target

    folder, ledger_id, digest = ledger_target.ledger_context()
    for slot_number, slot in enumerate(ledger_target.LEDGER_SLOTS):
        path = folder / slot.replace("@ID@", ledger_id).replace("DIGEST", digest)
        data = path.read_bytes() if path.exists() else b"PAR1"  # the temporary: a torn start
        name = ("LEDGER", "digest", "runs", "labels", "inputs", "figures", "temporary")[slot_number]
        data = data.replace(ledger_id.encode(), b"@ID@")
        if slot == "LEDGER":  # the time it was made, fixed so the seed is the same each time
            made = json.loads(data)
            made["created_at"] = "2026-12-01T09:00:00+00:00"
            data = json.dumps(made, indent=2).encode()
        write(CORPUS / "ledger" / f"{slot_number}-{name}", bytes([slot_number]) + data)


if __name__ == "__main__":
    main()
