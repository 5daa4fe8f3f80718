"""vLLM's per-request spec-decode metrics from a real run, offline and served, with vLLM's own
counters over the same requests.

Uses what ``vllm_gate.py`` uses (the cached venv, the tiny model, the same prompts and n-gram
drafting), with vLLM's ``per_request_spec_decode_metrics`` on (``--level``, default
``detailed``):

1. offline (``offline.py --per-request-spec-decode-metrics LEVEL``), into ``OUT_DIR/offline/``:
   ``requests.jsonl`` (one line per output: its leg, ``request_id`` and
   ``spec_decode_metrics.to_dict()``), ``get-metrics.json`` (every ``get_metrics()`` metric
   once after the last leg: the counters over the same requests), ``vllm-arm.json``,
   ``outputs.jsonl`` and ``engine.log``;
2. served (``vllm serve --per-request-spec-decode-metrics LEVEL``), into ``OUT_DIR/serve/``:
   each prompt ``--repeat`` times through ``/v1/completions``; ``completions.jsonl`` (the
   response bodies as served, each with ``metrics.speculative_decoding``), ``requests.jsonl``
   (the same bodies with the leg's ``leg``, ``run``, ``record``, ``secs`` and ``tok_s`` added
   at the top level) and ``metrics.prom`` (``/metrics`` scraped before the first request and
   after the last, concatenated: the server's counters over the same requests).

Every wait is bounded, and the server is stopped by its process group on every way out.

    python examples/vllm/vllm_requests.py --out-dir /tmp/vllm-requests   # prints {"out_dir": ...}
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import install  # noqa: E402  (a sibling script)
import vllm_gate  # noqa: E402
from vllm_gate import GateError, Server, http  # noqa: E402

LEVELS = ("summary", "detailed")


def serve_requests(python: Path, model: Path, args, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    flag = ["--per-request-spec-decode-metrics", args.level]
    server = Server(python, model, args, out / "server.log", flag)
    deadline = time.monotonic() + args.deadline
    try:
        server.wait_ready(min(args.timeout * 3, args.deadline))
        before = server.metrics()
        bodies, requests = [], []
        for run in range(1, args.repeat + 1):
            for record, prompt in enumerate(args.prompt_texts):
                if time.monotonic() > deadline:
                    raise GateError(f"the run took longer than --deadline {args.deadline:g} s")
                body = vllm_gate.completion_body(prompt, args.max_tokens)
                start = time.perf_counter()
                raw = http(server.base + "/v1/completions", body, timeout=args.timeout)
                secs = time.perf_counter() - start
                response = json.loads(raw)
                tokens = response["usage"]["completion_tokens"]
                leg = {"leg": len(bodies), "run": run, "record": record, "secs": secs,
                       "tok_s": tokens / secs}  # fmt: skip
                bodies.append(raw.decode().strip() + "\n")
                requests.append(json.dumps({**leg, **response}) + "\n")
        after = server.metrics()
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise GateError(f"vllm serve: {error}; its output is in {server.log}") from error
    finally:
        server.stop()
    (out / "completions.jsonl").write_text("".join(bodies))
    (out / "requests.jsonl").write_text("".join(requests))
    (out / "metrics.prom").write_text(before + after)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--level", choices=LEVELS, default="detailed")
    vllm_gate.gate_arguments(parser)
    args = vllm_gate.parsed(parser, argv)
    out = args.out_dir
    started = time.monotonic()
    try:
        python = install.ensure_installed()
        model = vllm_gate.ensure_model(python, args.seed, args.steps, timeout=3600)
        prompts = out / "prompts.json"
        prompts.write_text(json.dumps(args.prompt_texts, indent=2) + "\n")
        level = ["--per-request-spec-decode-metrics", args.level]
        vllm_gate.run_offline(python, model, prompts, args, out / "offline", level)
        if not args.skip_serve:
            serve_requests(python, model, args, out / "serve")
    except (GateError, subprocess.TimeoutExpired) as error:
        sys.exit(f"vllm_requests: {error}")
    summary = {
        "out_dir": str(out),
        "model": str(model),
        "level": args.level,
        "speculative_config": vllm_gate.speculative_config(args.k, args.ngram),
        "seconds": round(time.monotonic() - started, 1),
    }
    (out / "capture.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
