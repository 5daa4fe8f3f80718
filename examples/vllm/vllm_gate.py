"""A benchmark gate over a real vLLM (CPU build) with n-gram speculative decoding.

Installs vLLM into its own cached venv (``install.py``), makes the tiny model
(``make_model.py``), then runs vLLM twice on the same prompts, greedy, float32, eager, one
thread (``OMP_NUM_THREADS=1``: torch with two threads on a loaded two-core machine ran about
20x slower) and a 1 GiB KV cache:

1. offline (``offline.py``): one ``LLM``, each prompt ``--repeat`` times, written to
   ``OUT_DIR/offline/``: ``vllm-arm.json`` as the gate's capture script writes it (counters
   from ``get_metrics()`` once after the last leg), ``get-metrics.json``, ``outputs.jsonl`` and
   ``engine.log`` (with one ``SpecDecoding metrics:`` line per leg);
2. online: ``vllm serve`` on 127.0.0.1, written to ``OUT_DIR/serve/``:
   - each prompt ``--repeat`` times through ``/v1/completions``, runs ordered run by run (the
     warm legs one stretch at the end), ``/metrics`` scraped before and after each leg
     (``metrics/leg-<i>.prom``: both scrapes, concatenated), ``metrics-warm.prom`` (before the
     first warm leg, after the last), ``completions.jsonl`` (the responses) and ``legs.json``;
   - ``vllm bench serve --save-result`` over the same prompts (``bench.json``) and a second run
     with ``--append-result`` (``bench-append.json``: a copy of the first with the second
     appended), each with the scrapes around it (``metrics/bench-<n>.prom``);
   - ``metrics-last.prom``, a scrape once the server's last logging interval has passed, and
     ``server.log``, the server's output with its ``SpecDecoding metrics:`` lines.

Every wait is bounded (``--timeout`` per request or command, ``--deadline`` for the server's
whole run); the server runs in its own process group and is stopped by its pid on every way out.

    python examples/vllm/vllm_gate.py --out-dir /tmp/vllm-gate      # prints {"out_dir": ..., ...}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "llamacpp"))

import install  # noqa: E402  (a sibling script)
from gate_server import HOST, free_port, http  # noqa: E402  (the llama.cpp gate's own)

SERVED_NAME = "tiny-llama"
# Code-like prompts in the style of the training text: greedy continuations repeat their spans.
PROMPTS = (
    "    def __init__(self, name, value):\n        self.name = name\n        self.value = value\n",
    "import os\nimport sys\nimport re\n\ndef main(argv):\n    parser = argparse.ArgumentParser(",
    '        """Return the value of the option.\n\n        If the option is not set, return',
    "    if isinstance(value, str):\n        return value\n    if isinstance(value, int):\n",
)
# One setting for both engines: vLLM's n-gram proposer looks up suffix n-grams of exactly
# NGRAM tokens (prompt_lookup_min = prompt_lookup_max) and drafts up to K tokens.
K, NGRAM = 4, 2
LOG_INTERVAL = 1.0  # VLLM_LOG_STATS_INTERVAL for the server: seconds between its log lines


class GateError(Exception):
    pass


def speculative_config(k: int = K, ngram: int = NGRAM) -> dict:
    return {
        "method": "ngram",
        "num_speculative_tokens": k,
        "prompt_lookup_min": ngram,
        "prompt_lookup_max": ngram,
    }


def engine_env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env["VLLM_LOG_STATS_INTERVAL"] = str(LOG_INTERVAL)
    env.pop("DFLASH_STEP_LOG", None)
    return env


def ensure_model(python: Path, seed: int, steps: int, timeout: float) -> Path:
    command = [str(python), str(HERE / "make_model.py"), "--seed", str(seed), "--steps", str(steps)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise GateError(f"make_model.py failed with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return Path(json.loads(proc.stdout.strip().splitlines()[-1])["model"])


def run_logged(command: list[str], log: Path, timeout: float, what: str, env: dict) -> None:
    """A command with its output in ``log``, killed with its children past ``timeout``."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            raise GateError(
                f"{what} took longer than {timeout:g} s; its output is in {log}"
            ) from None
        finally:
            stop_group(proc)
    if code != 0:
        raise GateError(f"{what} exited with {code}; its output is in {log}")


def stop_group(proc: subprocess.Popen, grace: float = 30) -> None:
    """Stops the process and everything it started (its own process group, id = its pid)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    # The leader may have exited before its children: the group is killed either way.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_offline(python: Path, model: Path, prompts: Path, args, out: Path, extra=()) -> None:
    out.mkdir(parents=True, exist_ok=True)
    command = [
        str(python),
        str(HERE / "offline.py"),
        "--model",
        str(model),
        "--prompts",
        str(prompts),
        "--repeat",
        str(args.repeat),
        "--max-tokens",
        str(args.max_tokens),
        "--speculative-config",
        json.dumps(speculative_config(args.k, args.ngram)),
        "--out-dir",
        str(out),
        *extra,
    ]
    run_logged(command, out / "engine.log", args.timeout * 4, "vLLM offline", engine_env())


class Server:
    """``vllm serve`` on 127.0.0.1 in its own process group, stopped by its pid."""

    def __init__(self, python: Path, model: Path, args, log: Path, extra=()):
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.log = log
        command = [
            str(python),
            str(HERE / "vllm_cli.py"),
            "serve",
            str(model),
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--served-model-name",
            SERVED_NAME,
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            "512",
            "--seed",
            "0",
            "--speculative-config",
            json.dumps(speculative_config(args.k, args.ngram)),
            *extra,
        ]
        self.output = open(log, "w")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            command,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            env=engine_env(),
            start_new_session=True,
        )

    def wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise GateError(f"vllm serve exited with {self.proc.returncode} at start")
            try:
                http(self.base + "/health", timeout=2)
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise GateError(f"vllm serve was not ready within {seconds:g} s")

    def metrics(self) -> str:
        return http(self.base + "/metrics", timeout=30).decode()

    def stop(self) -> None:
        stop_group(self.proc)
        self.output.close()


def bench(python: Path, server: Server, model: Path, dataset: Path, args, out: Path, extra):
    command = [
        str(python),
        str(HERE / "vllm_cli.py"),
        "bench",
        "serve",
        "--backend",
        "vllm",
        "--base-url",
        server.base,
        "--endpoint",
        "/v1/completions",
        "--model",
        SERVED_NAME,
        "--tokenizer",
        str(model),
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        str(len(args.prompt_texts)),
        "--custom-output-len",
        str(args.max_tokens),
        "--ignore-eos",
        "--temperature",
        "0",
        "--max-concurrency",
        "1",
        "--seed",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(out),
        *extra,
    ]
    env = {**engine_env(), "VLLM_LOG_STATS_INTERVAL": "10"}
    run_logged(command, out / f"bench-{len(list(out.glob('bench-*.log'))) + 1}.log",
               args.timeout * 2, "vllm bench serve", env)  # fmt: skip


def run_serve(python: Path, model: Path, args, out: Path) -> None:
    metrics_dir = out / "metrics"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    for old in [*metrics_dir.glob("*.prom"), *out.glob("bench*")]:
        old.unlink()
    dataset = out / "prompts.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in args.prompt_texts))
    deadline = time.monotonic() + args.deadline
    server = Server(python, model, args, out / "server.log")
    try:
        server.wait_ready(min(args.timeout * 3, args.deadline))
        legs, responses, warm_before, after = [], [], None, None
        for run in range(1, args.repeat + 1):
            for record, prompt in enumerate(args.prompt_texts):
                if time.monotonic() > deadline:
                    raise GateError(f"the run took longer than --deadline {args.deadline:g} s")
                body = completion_body(prompt, args.max_tokens)
                before = server.metrics()
                start = time.perf_counter()
                raw = http(server.base + "/v1/completions", body, timeout=args.timeout)
                secs = time.perf_counter() - start
                after = server.metrics()
                response = json.loads(raw)
                usage = response["usage"]
                legs.append(
                    {
                        "run": run,
                        "record": record,
                        "finish_reason": response["choices"][0]["finish_reason"],
                        "prompt_tokens": usage["prompt_tokens"],
                        "completion_tokens": usage["completion_tokens"],
                        "secs": secs,
                        "tok_s": usage["completion_tokens"] / secs,
                    }
                )
                responses.append(json.dumps(response) + "\n")
                (metrics_dir / f"leg-{len(legs) - 1}.prom").write_text(before + after)
                if run > 1 and warm_before is None:
                    warm_before = before
        if warm_before is not None:
            (out / "metrics-warm.prom").write_text(warm_before + after)
        (out / "legs.json").write_text(json.dumps(legs, indent=2) + "\n")
        (out / "completions.jsonl").write_text("".join(responses))
        for number, extra in ((1, ["--result-filename", "bench.json"]), (2, None)):
            if extra is None:
                shutil.copyfile(out / "bench.json", out / "bench-append.json")
                extra = ["--result-filename", "bench-append.json", "--append-result"]
            before = server.metrics()
            bench(python, server, model, dataset, args, out, extra)
            (metrics_dir / f"bench-{number}.prom").write_text(before + server.metrics())
        # The server logs its counters every LOG_INTERVAL seconds: wait out the last interval
        # so the log covers every request (a server stopped at once loses that line).
        time.sleep(3 * LOG_INTERVAL + 1)
        (out / "metrics-last.prom").write_text(server.metrics())
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise GateError(f"vllm serve: {error}; its output is in {server.log}") from error
    finally:
        server.stop()


def completion_body(prompt: str, max_tokens: int) -> dict:
    """One greedy /v1/completions request of the gate: a fixed output length (EOS ignored)."""
    return {
        "model": SERVED_NAME,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }


def gate_arguments(parser: argparse.ArgumentParser) -> None:
    """The run's options every capture of this tiny gate takes (this one, vllm_requests.py)."""
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--repeat", type=int, default=3, help="runs of each prompt (run 1 cold)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=K, help="draft tokens per step")
    parser.add_argument("--ngram", type=int, default=NGRAM, help="n-gram size looked up")
    parser.add_argument("--seed", type=int, default=1, help="the tiny model's training seed")
    parser.add_argument("--steps", type=int, default=1200, help="the tiny model's training steps")
    parser.add_argument("--skip-serve", action="store_true", help="the offline run only")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per request/command")
    parser.add_argument("--deadline", type=float, default=1800, help="seconds for the server")


def parsed(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The arguments checked, with the prompts chosen and the output folder made."""
    args = parser.parse_args(argv)
    if not 1 <= args.prompts <= len(PROMPTS) or not 1 <= args.repeat <= 20:
        parser.error(f"--prompts 1..{len(PROMPTS)}, --repeat 1..20")
    args.prompt_texts = list(PROMPTS[: args.prompts])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    gate_arguments(parser)
    args = parsed(parser, argv)
    out = args.out_dir
    started = time.monotonic()
    try:
        python = install.ensure_installed()
        model = ensure_model(python, args.seed, args.steps, timeout=3600)
        prompts = out / "prompts.json"
        prompts.write_text(json.dumps(args.prompt_texts, indent=2) + "\n")
        run_offline(python, model, prompts, args, out / "offline")
        if not args.skip_serve:
            run_serve(python, model, args, out / "serve")
    except (GateError, subprocess.TimeoutExpired) as error:
        sys.exit(f"gate: {error}")
    summary = {
        "out_dir": str(out),
        "model": str(model),
        "speculative_config": speculative_config(args.k, args.ngram),
        "seconds": round(time.monotonic() - started, 1),
    }
    (out / "gate.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
