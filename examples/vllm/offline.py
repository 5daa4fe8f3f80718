"""vLLM's offline arm: one ``LLM``, every prompt ``--repeat`` times, written as the gate writes it.

Runs in vLLM's venv (``vllm_gate.py`` starts it). Writes into ``--out-dir``:

- ``vllm-arm.json``: the arm record exactly as the benchmark gate's capture script writes it:
  legs ``{run, record, finish_reason, prompt_tokens, completion_tokens, secs, tok_s}``,
  ``warm_legs``, ``cold_legs_discarded``, ``cold_discard_cause``, and ``metrics`` with
  ``output_throughput_tok_s`` (median tok_s of the ``run > 1`` legs) and, for every metric of
  ``llm.get_metrics()`` whose name holds ``spec_decode``, its ``.value`` (a Vector has none:
  null), read once after the last leg; and ``speculative_config``, the object passed to
  ``LLM(...)`` as given (a run with ``"rejection_sample_method": "synthetic"`` is a matched
  arm: ``docs/matched-arms.md``);
- ``get-metrics.json``: every metric ``get_metrics()`` returned at that moment, with its type,
  labels and value(s), the per-position Vector included: what the record leaves out;
- ``outputs.jsonl``: each leg's prompt and output token ids and text;
- ``requests.jsonl`` (with ``--per-request-spec-decode-metrics summary`` or ``detailed``): one
  line per output, its leg (``leg``, ``run``, ``record``, ``secs``, ``tok_s``, ...), vLLM's
  ``request_id`` and its ``spec_decode_metrics.to_dict()``, as ``docs/oracle-steps.md`` reads it.

After each leg it calls ``llm.llm_engine.do_log_stats()``, so the log (this process's output)
holds one ``SpecDecoding metrics:`` line per leg that drafted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def metric_json(metric) -> dict:
    entry = {"name": metric.name, "type": type(metric).__name__, "labels": metric.labels}
    for field in ("value", "values", "count", "sum", "buckets"):
        if hasattr(metric, field):
            entry[field] = getattr(metric, field)
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", type=Path, required=True, help="a JSON list of strings")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=64,
        help="each output's length (ignore_eos): give our gate's, for a matched run",
    )
    parser.add_argument("--speculative-config", required=True, help="JSON")
    parser.add_argument("--max-model-len", type=int, default=512)
    # The defaults are the CPU tests' (make_model.py's tiny model); on a GPU box give both arms
    # of a comparison the gate's own engine settings.
    parser.add_argument("--dtype", default="float32", help="LLM(dtype=...)")
    parser.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="LLM(enforce_eager=...); --no-enforce-eager lets vLLM capture CUDA graphs",
    )
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument(
        "--per-request-spec-decode-metrics",
        choices=("none", "summary", "detailed"),
        default="none",
        help="vLLM's per-request acceptance metrics on each output (written to requests.jsonl)",
    )
    args = parser.parse_args()
    per_request = args.per_request_spec_decode_metrics

    from vllm import LLM, SamplingParams

    prompts = json.loads(args.prompts.read_text())
    speculative_config = json.loads(args.speculative_config)
    llm = LLM(
        model=args.model,
        dtype=args.dtype,
        enforce_eager=args.enforce_eager,
        max_model_len=args.max_model_len,
        # a copy: the record keeps the setting as given, whatever vLLM makes of its argument
        speculative_config=dict(speculative_config),
        disable_log_stats=False,
        seed=0,
        **({} if per_request == "none" else {"per_request_spec_decode_metrics": per_request}),
    )
    sampling = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    legs, outputs, requests = [], [], []
    for record, prompt in enumerate(prompts):
        for run in range(1, args.repeat + 1):
            start = time.perf_counter()
            result = llm.generate([prompt], sampling, use_tqdm=False)[0]
            secs = time.perf_counter() - start
            completion = result.outputs[0]
            tokens = len(completion.token_ids)
            legs.append(
                {
                    "run": run,
                    "record": record,
                    "finish_reason": completion.finish_reason,
                    "prompt_tokens": len(result.prompt_token_ids),
                    "completion_tokens": tokens,
                    "secs": secs,
                    "tok_s": tokens / secs,
                }
            )
            outputs.append(
                {
                    "record": record,
                    "run": run,
                    "prompt_token_ids": list(result.prompt_token_ids),
                    "token_ids": list(completion.token_ids),
                    "text": completion.text,
                }
            )
            if per_request != "none":
                metrics = completion.spec_decode_metrics
                requests.append(
                    {
                        "leg": len(legs) - 1,
                        **legs[-1],
                        "request_id": result.request_id,
                        "spec_decode_metrics": None if metrics is None else metrics.to_dict(),
                    }
                )
            llm.llm_engine.do_log_stats()
    warm = [leg for leg in legs if leg["run"] > 1]
    metrics = {"output_throughput_tok_s": statistics.median(leg["tok_s"] for leg in warm)}
    every = llm.get_metrics()
    for metric in every:
        if "spec_decode" in metric.name:
            metrics[metric.name] = getattr(metric, "value", None)
    arm = {
        "legs": legs,
        "warm_legs": len(warm),
        "cold_legs_discarded": len(legs) - len(warm),
        "cold_discard_cause": "run 1 of each prompt: first use of the engine's code paths",
        "metrics": metrics,
        "speculative_config": speculative_config,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "vllm-arm.json").write_text(json.dumps(arm, indent=2) + "\n")
    dump = [metric_json(metric) for metric in every]
    (args.out_dir / "get-metrics.json").write_text(json.dumps(dump, indent=2) + "\n")
    lines = "".join(json.dumps(output) + "\n" for output in outputs)
    (args.out_dir / "outputs.jsonl").write_text(lines)
    if per_request != "none":
        lines = "".join(json.dumps(request) + "\n" for request in requests)
        (args.out_dir / "requests.jsonl").write_text(lines)


if __name__ == "__main__":
    main()
