"""A benchmark gate over ``llama-server`` with the step-log hook and several parallel slots.

Starts one server (``--parallel`` slots, on 127.0.0.1 only) with ``DFLASH_STEP_LOG`` set, then
runs legs one after another: each leg sends ``--concurrency`` requests to ``/completion`` at
once (at most one per slot, so each request has its own slot for the whole leg) and waits for
all of them. The runs are ordered run by run (every prompt's run 1, then every prompt's run 2,
...), so the cold legs come first and the warm ones form one stretch at the end.

Written to OUT_DIR, each in the server's own format:

- ``our-arm.json``: the arm record, one leg per prompt and run (``tok_s`` = the leg's
  completion tokens over its wall time), with each response's ``id_slot``, ``tokens_predicted``
  and ``timings`` and the leg's ``/metrics`` deltas under ``engine_counters``;
- ``steps*.jsonl``: the step log;
- ``completions.jsonl``, ``completions-warm.jsonl``: every ``/completion`` response as the
  server sent it, one per line (all legs; the warm legs only);
- ``metrics/leg-<i>.prom``: the ``/metrics`` scrape before and after leg i, concatenated;
  ``metrics-run.prom``: before and after the whole run; ``metrics-warm.prom``: before the
  first warm leg and after the last;
- ``llamacpp-arm.json``: the server as an oracle arm over the warm legs: the warm scrape pair
  as ``metrics.before``/``metrics.after``, the legs (``run``, ``tok_s``, ...) and, as tok/s,
  the median ``tok_s`` of the warm legs (run > 1), as ``our-arm.json``'s is folded, so the
  two arms' tok/s are one kind; the median ``predicted_per_second`` of the warm responses (each
  request's own generation speed, another kind) is kept as
  ``median_request_predicted_per_second``.

    python examples/llamacpp/gate_server.py --out-dir /tmp/server --prompts 2 --repeat 3

Bounded: at most 4096 requests in all, each with ``--timeout`` seconds, and the whole run
within ``--deadline`` seconds; the server is stopped on every way out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_common import PROMPTS, arm_record, binaries, models, speculative_args, unix_now

HOST = "127.0.0.1"
MAX_REQUESTS = 4096
COUNTERS = (
    "spec_decode_num_drafts_total",
    "spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total",
    "tokens_predicted_total",
)
SAMPLE = re.compile(r"^llamacpp:(\w+) (\S+)$")


class GateError(Exception):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def http(url: str, body: dict | None = None, timeout: float = 60) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def as_line(response: bytes) -> str:
    """The response as the server sent it, on one line (it sends compact JSON: one already)."""
    text = response.decode().strip()
    return (text if "\n" not in text else json.dumps(json.loads(text))) + "\n"


def counters(scrape: str) -> dict[str, float]:
    values = {}
    for line in scrape.splitlines():
        match = SAMPLE.match(line)
        if match:
            values[match.group(1)] = float(match.group(2))
    return values


def deltas(before: str, after: str) -> dict[str, int]:
    first, second = counters(before), counters(after)
    return {name: round(second.get(name, 0) - first.get(name, 0)) for name in COUNTERS}


class Server:
    """One llama-server process on 127.0.0.1, stopped however the gate ends."""

    def __init__(self, binary: str, model: dict, args, env: dict, log: Path):
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        command = [
            *speculative_args(binary, model, args),
            # an oracle at a chosen acceptance (fold-acceptance --matched llamacpp)
            *(["--spec-synth-rates", args.spec_synth_rates] if args.spec_synth_rates else []),
            "--parallel",
            str(args.parallel),
            "--ctx-size",
            str(1024 * args.parallel),
            "--threads",
            str(args.threads),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--metrics",
        ]
        self.output = open(log, "w")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(command, env=env, stdout=self.output, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise GateError(f"llama-server exited with {self.proc.returncode} at start")
            try:
                if json.loads(http(self.base + "/health", timeout=2)).get("status") == "ok":
                    return
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            time.sleep(0.1)
        raise GateError(f"llama-server was not ready within {seconds:g} s")

    def metrics(self) -> str:
        return http(self.base + "/metrics").decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.output.close()


def run_leg(server: Server, prompt: int, run: int, args, pool: ThreadPoolExecutor) -> tuple:
    texts = [
        PROMPTS[(prompt * args.concurrency + i) % len(PROMPTS)] for i in range(args.concurrency)
    ]
    body = {"n_predict": args.n_predict, "temperature": 0, "cache_prompt": False}
    before = server.metrics()
    start = unix_now()
    futures = [
        pool.submit(http, server.base + "/completion", {**body, "prompt": text}, args.timeout)
        for text in texts
    ]
    raw = [future.result() for future in futures]
    end = unix_now()
    after = server.metrics()
    responses = [json.loads(text) for text in raw]
    completion = sum(response["tokens_predicted"] for response in responses)
    secs = end - start
    stops = {response["stop_type"] for response in responses}
    leg = {
        "run": run,
        "finish_reason": "length" if stops == {"limit"} else "stop",
        "prompt_tokens": sum(response["tokens_evaluated"] for response in responses),
        "completion_tokens": completion,
        "secs": round(secs, 6),
        "tok_s": completion / secs,
        "generate_start_unix": start,
        "generate_end_unix": end,
        "prompt": prompt,
        "requests": len(responses),
        "engine_counters": {
            "metrics_delta": deltas(before, after),
            "responses": [
                {
                    "id_slot": response["id_slot"],
                    "tokens_predicted": response["tokens_predicted"],
                    "timings": response["timings"],
                }
                for response in responses
            ],
        },
    }
    return leg, raw, before, after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each prompt (run 1 cold)")
    parser.add_argument("--parallel", type=int, default=4, help="server slots")
    parser.add_argument("--concurrency", type=int, default=4, help="requests per leg, at once")
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--draft-max", type=int, default=8)
    parser.add_argument("--draft", choices=("draft", "target", "unrelated"), default="draft")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--spec-synth-rates",
        metavar="P0,P1,...",
        help="llama-server's synthetic acceptance rates (fold-acceptance --matched llamacpp)",
    )
    parser.add_argument("--log", default="steps.jsonl", help="DFLASH_STEP_LOG under OUT_DIR")
    parser.add_argument("--bin-dir", type=Path, help="patched llama.cpp binaries (else built)")
    parser.add_argument("--models", type=Path, help="directory of make_models.py's output")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per request")
    parser.add_argument("--deadline", type=float, default=900, help="seconds for the whole run")
    args = parser.parse_args(argv)
    if not 1 <= args.concurrency <= args.parallel:
        parser.error("--concurrency must be 1..--parallel: one slot per request in a leg")
    if args.prompts < 1 or args.repeat < 1:
        parser.error("--prompts and --repeat must be at least 1")
    if args.prompts * args.repeat * args.concurrency > MAX_REQUESTS:
        parser.error(f"at most {MAX_REQUESTS} requests in one run")

    out = args.out_dir
    (out / "metrics").mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("steps*.jsonl"), *out.glob("metrics/leg-*.prom")]:
        old.unlink()
    binary = binaries(args.bin_dir)["llama-server"]
    model = models(args.models, out)
    env = {**os.environ, "DFLASH_STEP_LOG": str(out / args.log)}
    env.pop("DFLASH_STEP_LEG", None)  # one server serves every leg: legs are told by time
    deadline = time.monotonic() + args.deadline
    server = Server(binary, model, args, env, out / "server.log")
    legs, completions, warm_completions = [], [], []
    try:
        server.wait_ready(min(120.0, args.deadline))
        run_before = server.metrics()
        warm_before = None
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            for run in range(1, args.repeat + 1):
                for prompt in range(args.prompts):
                    if time.monotonic() > deadline:
                        raise GateError(f"the run took longer than --deadline {args.deadline:g} s")
                    leg, raw, before, after = run_leg(server, prompt, run, args, pool)
                    (out / "metrics" / f"leg-{len(legs)}.prom").write_text(before + after)
                    if run > 1 and warm_before is None:
                        warm_before = before
                    legs.append(leg)
                    lines = [as_line(text) for text in raw]
                    completions += lines
                    if run > 1:
                        warm_completions += lines
        run_after = server.metrics()
    except (GateError, urllib.error.URLError, TimeoutError) as error:
        sys.exit(f"gate: {error}; the server's output is in {out / 'server.log'}")
    finally:
        server.stop()

    (out / "metrics-run.prom").write_text(run_before + run_after)
    if warm_before is not None:
        (out / "metrics-warm.prom").write_text(warm_before + run_after)
        speeds = [json.loads(line)["timings"]["predicted_per_second"] for line in warm_completions]
        # tok/s as our arm's throughput fold gives it (the median tok_s of the warm legs, each a
        # leg's completion tokens over its wall time), so that a ratio of two arms compares one
        # kind; the legs go with it, for the reader to check the figure and resample it. One
        # request's own speed is another kind, kept apart under its own name.
        oracle = {
            "engine": "llamacpp",
            "output_throughput_tok_s": statistics.median(
                leg["tok_s"] for leg in legs if leg["run"] > 1
            ),
            "median_request_predicted_per_second": statistics.median(speeds),
            "legs": [
                {key: leg[key] for key in ("run", "prompt", "completion_tokens", "secs", "tok_s")}
                for leg in legs
            ],
            "metrics": {"before": warm_before, "after": run_after},
        }
        (out / "llamacpp-arm.json").write_text(json.dumps(oracle, indent=2) + "\n")
    (out / "completions.jsonl").write_text("".join(completions))
    (out / "completions-warm.jsonl").write_text("".join(warm_completions))
    config = {
        key: getattr(args, key)
        for key in (
            "prompts",
            "repeat",
            "parallel",
            "concurrency",
            "n_predict",
            "draft_max",
            "draft",
            "threads",
            "log",
            "spec_synth_rates",
        )
    }
    record = arm_record("llama-server", config, legs)
    (out / "our-arm.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
