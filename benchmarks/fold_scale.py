"""Scale benchmark: fold a 10-million-line step log in three shapes, against DuckDB and an
orjson loop.

    python benchmarks/fold_scale.py --lines 10000000

generates a seeded v1 log and an arm record with 50 legs in a scratch directory, in three
shapes of the same steps:

- ``layout``: the writers' exact byte layout (about 130 bytes a line);
- ``other``: valid v1 lines in another writer's shape: keys in another order, ``": "`` and
  ``", "`` spacing, an extra key with a nested value, and a non-ASCII leg label;
- ``damaged``: the writers' layout with one malformed line in the middle and a torn last line,
  folded with ``--skip-bad-lines`` (DuckDB with ``ignore_errors = true``, the orjson loop
  skipping lines it cannot parse);
- ``requests``: the writers' layout in the shape of a serving load test: requests of
  ``SHORT_REQUEST_STEPS`` steps each (10^6 requests in 10 M lines), where a fold's cost per
  request shows: its peak memory per request and the size of its JSON document are reported.

Then the same job (read every line, attribute each step to the leg window holding its t_ns,
sum S/P/A per leg) runs three ways per shape, each in a child process so that its peak
anonymous memory (RssAnon, sampled from /proc every 10 ms) is its own, set up as the command
sets up its process (``fold.command.process``: one BLAS thread, polars handing freed pages
back at once; set before polars loads) and with its imports loaded
before the clock starts:

- ``fold``: ``fold.api.fold_acceptance``, the whole fold (requests, histograms, windows, step
  times too) by its default path, the native reader (the run fails if it is not built), and
  its JSON document made as ``--json`` makes it (the bytes are counted, not written);
- ``duckdb``: ``read_json`` with a range join against the legs and the same aggregation;
- ``orjson``: a plain Python loop, ``orjson.loads`` per line and a bisect per step;
- ``fold-polars`` (with ``--with-polars``): the fold with ``FOLD_ACCEPTANCE_NATIVE=0``, the
  reference reader;
- ``fold-baseline`` (with ``--baseline DIR``): the fold of another source tree of the package
  (its extension built in place), interleaved with this one: a before/after in one run, under
  the same load.

DuckDB is only a benchmark opponent, not a dependency: if it is missing the script installs it
into the running interpreter's environment with pip (``--no-install`` skips that opponent).
Every contestant's S/P/A per leg must agree with the fold's on the clean layout, in every
shape, or the script fails; the damaged fold must name the malformed line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# This script run as one contestant (``measure``): ``--child NAME ARM LOG SHAPE``.
CHILD = __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--child"
if CHILD:
    # A contestant's process is set up as the command sets up its own (fold.command.process:
    # one BLAS thread, polars' allocator handing freed pages back), before polars loads here.
    importlib.import_module("fold.command.process")

# polars puts its own allocator setting in the environment when it loads and finds none, and
# a contestant inherits the environment: with it, the command's own setting (which it only
# sets where none is) never applied, and freed pages lingered (the load test's peak: 537 MiB
# against 483). Only a setting the user made before this script ran goes to a contestant.
ALLOCATOR = "_RJEM_MALLOC_CONF"
USER_ALLOCATOR = os.environ.get(ALLOCATOR)

import polars as pl  # noqa: E402  after the process setup of a contestant, above

LEGS = 50
WRITERS = 16
STEPS_PER_REQUEST = 200
LINE_SPACING_NS = 2_000  # one step line every 2 us: a 10M-line log covers 20 s of wall time
BASE_NS = 1_764_450_000_000_000_000
CHUNK_LINES = 1_000_000
NATIVE_SWITCH = "FOLD_ACCEPTANCE_NATIVE"
SHAPES = ("layout", "other", "damaged", "requests")
SHORT_REQUEST_STEPS = 10
BAD_LINE = b'{"v":1,"w":"this line is malformed\n'
TORN_TAIL = b'{"v":1,"w":"00000000000000ff","n":12,"t_ns":17644500'


def _hash(expr: pl.Expr, salt: int) -> pl.Expr:
    """A cheap seeded integer hash (splitmix-like), so the log is the same for the same seed."""
    x = (expr + salt) * 0x9E3779B1 % 4294967291
    return (x * 2654435761 + 12345) % 4294967291


def generate_log(
    path: Path, lines: int, seed: int = 1, requests: int | None = None, shape: str = "layout"
) -> int | None:
    """Write ``lines`` v1 step lines in ``shape`` (see the module), vectorised with polars.

    Each request takes STEPS_PER_REQUEST lines, or, with ``requests``, the log holds that many
    requests per writer whatever its size (to tell growth with lines from growth with requests).
    Returns the number of the malformed line of the damaged shape.
    """
    bad_line_number = None
    steps_per_request = (
        (SHORT_REQUEST_STEPS if shape == "requests" else STEPS_PER_REQUEST)
        if requests is None
        else max(1, -(-lines // (WRITERS * requests)))
    )
    with open(path, "wb") as out:
        for start in range(0, lines, CHUNK_LINES):
            count = min(CHUNK_LINES, lines - start)
            i = pl.int_range(start, start + count, dtype=pl.Int64, eager=False)
            frame = pl.select(i.alias("i")).with_columns(
                (pl.col("i") % WRITERS).alias("writer"),
                (pl.col("i") // WRITERS).alias("n"),
            )
            frame = frame.with_columns(
                (BASE_NS + pl.col("i") * LINE_SPACING_NS + _hash(pl.col("i"), seed) % 997).alias(
                    "t_ns"
                ),
                (pl.col("n") // steps_per_request).alias("seq"),
                # One line in 25 is a step without a draft (proposed 0).
                pl.when(_hash(pl.col("i"), seed + 1) % 25 == 0)
                .then(0)
                .otherwise(7)
                .alias("proposed"),
            ).with_columns(
                pl.min_horizontal(pl.col("proposed"), _hash(pl.col("i"), seed + 2) % 9).alias(
                    "accepted"
                ),
            )
            writer_ids = pl.Series(
                [f"{(seed * 0x9E3779B97F4A7C15 + w * 0xBF58476D1CE4E5B9) % 2**64:016x}"
                 for w in range(WRITERS)]
            )  # fmt: skip
            writer = pl.col("writer").replace_strict(list(range(WRITERS)), writer_ids)
            line = _line(shape, writer)
            if shape == "damaged" and start <= lines // 2 < start + count:
                middle = lines // 2 - start
                frame.slice(0, middle).select(line.alias("line")).write_csv(
                    out, include_header=False, quote_style="never"
                )
                out.write(BAD_LINE)
                bad_line_number = lines // 2 + 1
                frame = frame.slice(middle)
            frame.select(line.alias("line")).write_csv(
                out, include_header=False, quote_style="never"
            )
        if shape == "damaged":
            out.write(TORN_TAIL)
    return bad_line_number


def _line(shape: str, writer: pl.Expr) -> pl.Expr:
    if shape == "other":
        # json.dumps spacing, another key order, an extra key, a label outside ASCII.
        return pl.concat_str(
            pl.lit('{"seq": '),
            pl.col("seq").cast(pl.String),
            pl.lit(', "t_ns": '),
            pl.col("t_ns").cast(pl.String),
            pl.lit(', "proposed": '),
            pl.col("proposed").cast(pl.String),
            pl.lit(', "accepted": '),
            pl.col("accepted").cast(pl.String),
            pl.lit(', "emitted": '),
            (pl.col("accepted") + 1).cast(pl.String),
            pl.lit(', "host": {"name": "node-7", "gpu": [0, 1]}, "v": 1, "w": "'),
            writer,
            pl.lit('", "n": '),
            pl.col("n").cast(pl.String),
            pl.lit(', "pid": '),
            (4000 + pl.col("writer")).cast(pl.String),
            pl.lit(', "leg": "w\u00e4rm \\"b\\""}'),
        )
    return pl.concat_str(
        pl.lit('{"v":1,"w":"'),
        writer,
        pl.lit('","n":'),
        pl.col("n").cast(pl.String),
        pl.lit(',"t_ns":'),
        pl.col("t_ns").cast(pl.String),
        pl.lit(',"pid":'),
        (4000 + pl.col("writer")).cast(pl.String),
        pl.lit(',"seq":'),
        pl.col("seq").cast(pl.String),
        pl.lit(',"proposed":'),
        pl.col("proposed").cast(pl.String),
        pl.lit(',"accepted":'),
        pl.col("accepted").cast(pl.String),
        pl.lit(',"emitted":'),
        (pl.col("accepted") + 1).cast(pl.String),
        pl.lit("}"),
    )


def generate_arm(path: Path, lines: int) -> None:
    """50 legs cutting the log's time span in equal slices, each window 90% of its slice."""
    span = lines * LINE_SPACING_NS
    slice_ns = span // LEGS
    legs = []
    for index in range(LEGS):
        start_ns = BASE_NS + index * slice_ns + slice_ns // 20
        end_ns = start_ns + slice_ns * 9 // 10
        legs.append(
            {
                "run": index + 1,
                "prompt_tokens": 512,
                "completion_tokens": 1000,
                "secs": (end_ns - start_ns) / 1e9,
                "tok_s": 1000 / ((end_ns - start_ns) / 1e9),
                "finish_reason": "length",
                "generate_start_unix": start_ns // 1000 / 1e6,
                "generate_end_unix": end_ns // 1000 / 1e6,
            }
        )
    path.write_text(json.dumps({"legs": legs}))


# -- the contestants, each run in a child process ---------------------------------------------


def run_fold(arm: str, log: str, shape: str) -> dict:
    from fold.api import fold_acceptance
    from fold.present.output import dumps

    result = fold_acceptance(arm, [log], skip_bad_lines=shape == "damaged")
    document = dumps(result.to_json())
    requests = sum(len(leg["requests"] or ()) for leg in result.legs)
    return {
        "json_bytes": len(document),
        "requests": requests,
        "figures": {
            leg["index"]: (leg["steps"], leg["proposed"], leg["accepted"]) for leg in result.legs
        },
        "skipped_lines": [example.line for example in result.fold.skipped_examples],
        "torn_lines": result.fold.torn_lines,
    }


def run_duckdb(arm: str, log: str, shape: str) -> dict:
    import duckdb

    from fold.inputs.arm import load_arm

    legs = load_arm(arm).legs.select("index", "start_ns", "end_ns").rows()
    con = duckdb.connect()
    con.execute("CREATE TABLE legs (idx BIGINT, start_ns BIGINT, end_ns BIGINT)")
    con.executemany("INSERT INTO legs VALUES (?, ?, ?)", legs)
    columns = (
        "{v: 'BIGINT', w: 'VARCHAR', n: 'BIGINT', t_ns: 'BIGINT', pid: 'BIGINT', "
        "seq: 'UBIGINT', proposed: 'BIGINT', accepted: 'BIGINT', emitted: 'BIGINT', "
        "leg: 'VARCHAR'}"
    )
    ignore = ", ignore_errors = true" if shape == "damaged" else ""
    rows = con.execute(
        f"""
        SELECT l.idx,
               count(*) FILTER (WHERE s.proposed > 0) AS steps,
               sum(s.proposed) AS proposed,
               sum(s.accepted) AS accepted
        FROM read_json('{log}', format = 'newline_delimited', columns = {columns}{ignore}) AS s
        JOIN legs AS l ON s.t_ns BETWEEN l.start_ns AND l.end_ns
        GROUP BY l.idx
        """
    ).fetchall()
    return {
        "figures": {
            idx: (int(steps), int(proposed), int(accepted))
            for idx, steps, proposed, accepted in rows
        }
    }


def run_orjson(arm: str, log: str, shape: str) -> dict:
    from bisect import bisect_right

    import orjson

    from fold.inputs.arm import load_arm

    legs = load_arm(arm).legs.sort("start_ns")
    starts, ends = legs["start_ns"].to_list(), legs["end_ns"].to_list()
    indices = legs["index"].to_list()
    sums = {index: [0, 0, 0] for index in indices}
    with open(log, "rb") as handle:
        for line in handle:
            try:
                step = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the damaged shape's bad line and torn tail
            t_ns = step["t_ns"]
            position = bisect_right(starts, t_ns) - 1
            if position >= 0 and t_ns <= ends[position]:
                figures = sums[indices[position]]
                proposed = step["proposed"]
                if proposed > 0:
                    figures[0] += 1
                figures[1] += proposed
                figures[2] += step["accepted"]
    return {"figures": {index: tuple(figures) for index, figures in sums.items()}}


RUNNERS = {
    "fold": run_fold,
    "fold-polars": run_fold,
    "fold-baseline": run_fold,
    "duckdb": run_duckdb,
    "orjson": run_orjson,
}
BASELINE = "FOLD_SCALE_BASELINE"


def _child(name: str, arm: str, log: str, shape: str) -> None:
    # Every contestant runs in the process the command sets up (at the top of this module,
    # before polars loads), so none pays for OpenBLAS's idle spin or a stage's freed pages.
    # Imports are not part of the job: load them before the clock starts.
    import orjson  # noqa: F401

    import fold.api

    if name == "fold":
        import fold.folding.native

        if not fold.folding.native.available():
            raise SystemExit("fold: the native extension fold._native is not built or switched off")
    if name == "fold-baseline":
        import fold._native  # the baseline's own extension, or fail here
    if name == "duckdb":
        import duckdb  # noqa: F401
    start = time.perf_counter()
    report = RUNNERS[name](arm, log, shape)
    report["wall"] = time.perf_counter() - start
    report["figures"] = {str(k): v for k, v in report["figures"].items()}
    print(json.dumps(report))


def _rss_anon_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def contestant_environment(
    name: str, environment: dict[str, str], user_allocator: str | None
) -> dict[str, str]:
    """The environment a contestant runs in: this script's, without the native switch and
    without the allocator setting polars put there (``user_allocator``: the user's own)."""
    environment = dict(environment)
    environment.pop(NATIVE_SWITCH, None)
    environment.pop(ALLOCATOR, None)
    if user_allocator is not None:
        environment[ALLOCATOR] = user_allocator
    if name == "fold-polars":
        environment[NATIVE_SWITCH] = "0"
    if name == "fold-baseline":
        environment["PYTHONPATH"] = environment[BASELINE]
    return environment


def measure(name: str, arm: Path, log: Path, shape: str) -> dict:
    """Run one contestant in a child process, sampling its RssAnon every 10 ms."""
    environment = contestant_environment(name, dict(os.environ), USER_ALLOCATOR)
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", name, str(arm), str(log), shape],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_anon_kib(process.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = process.communicate()
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"{name} failed (exit {process.returncode})")
    report = json.loads(out)
    report["peak_rss_anon_mib"] = peak / 1024
    return report


def ensure_duckdb(install: bool) -> bool:
    if importlib.util.find_spec("duckdb") is not None:
        return True
    if not install:
        return False
    print("duckdb is not installed: installing it for this benchmark only", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "duckdb"], check=True)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, action="append", help="log sizes (repeatable)")
    parser.add_argument("--shape", action="append", choices=SHAPES, help="default: all three")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per contestant (the fastest wall and the highest peak kept)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-install", action="store_true", help="skip DuckDB if missing")
    parser.add_argument("--with-polars", action="store_true", help="add the reference reader")
    parser.add_argument("--only-fold", action="store_true", help="no opponents (memory runs)")
    parser.add_argument(
        "--no-orjson", action="store_true", help="DuckDB the only opponent (the slowest left out)"
    )
    parser.add_argument(
        "--requests-per-writer",
        type=int,
        default=None,
        help=f"requests per writer, whatever the size (default: one per {STEPS_PER_REQUEST} "
        "lines, so larger logs hold more requests)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="DIR",
        help="another source tree of the package (extension built in place) to fold too",
    )
    args = parser.parse_args()
    if args.baseline:
        os.environ[BASELINE] = str(Path(args.baseline).resolve())
    sizes = args.lines or [10_000_000]
    shapes = args.shape or list(SHAPES)
    have_duckdb = not args.only_fold and ensure_duckdb(not args.no_install)
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="fold-scale-"))
    scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for lines in sizes:
            arm = scratch / f"arm-{lines}.json"
            generate_arm(arm, lines)
            clean: dict | None = None
            for shape in shapes:
                log = scratch / f"steps-{lines}-{shape}.jsonl"
                start = time.perf_counter()
                bad_line = generate_log(log, lines, args.seed, args.requests_per_writer, shape)
                size_gb = log.stat().st_size / 1e9
                print(
                    f"generated {lines:,} lines, {shape} ({size_gb:.2f} GB) in "
                    f"{time.perf_counter() - start:.1f} s",
                    file=sys.stderr,
                )
                contestants = ["fold"] + (["fold-polars"] if args.with_polars else [])
                contestants += ["fold-baseline"] if args.baseline else []
                if not args.only_fold:
                    contestants += ["duckdb"] if have_duckdb else []
                    contestants += [] if args.no_orjson else ["orjson"]
                runs: dict[str, list[dict]] = {name: [] for name in contestants}
                for _ in range(args.repeat):
                    for name in contestants:  # interleaved, so load from others hits all alike
                        report = measure(name, arm, log, shape)
                        print(
                            f"  {name}: {report['wall']:.2f} s, "
                            f"{report['peak_rss_anon_mib']:.0f} MiB",
                            file=sys.stderr,
                        )
                        runs[name].append(report)
                best = {name: kept(reports) for name, reports in runs.items()}
                clean = clean or best["fold"]["figures"]
                for name, reports in runs.items():
                    if any(report["figures"] != clean for report in reports):
                        raise SystemExit(f"{shape}: {name} disagrees with the fold on S/P/A")
                if shape == "damaged" and (
                    best["fold"]["skipped_lines"] != [bad_line] or best["fold"]["torn_lines"] != 1
                ):
                    raise SystemExit(f"damaged: expected line {bad_line} skipped and one torn")
                rows.append((shape, lines, size_gb, best))
                log.unlink()
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print_table(rows)


def kept(reports: list[dict]) -> dict:
    """A contestant's runs as one: the wall of its fastest run (what load from elsewhere
    slowed least) and the highest peak of any run (a memory target is a bound, and the
    threads' overlap moves a peak from run to run)."""
    fastest = min(reports, key=lambda report: report["wall"])
    return {**fastest, "peak_rss_anon_mib": max(r["peak_rss_anon_mib"] for r in reports)}


TARGET_VS_DUCKDB = {"layout": 0.30, "other": 0.30, "damaged": 0.30, "requests": 0.5}
"""The fold's wall (the whole fold and its JSON) over DuckDB's, at most (issue 32's targets)."""
MEMORY_TARGET_MIB = 192
"""Peak RssAnon of a fold of 10 M lines in the writers' shapes, at most."""
REQUEST_BYTES_TARGET = 512
"""Peak RssAnon per request of the ``requests`` shape, at most."""
JSON_TARGET_BYTES = 2_000_000
"""The JSON document of the ``requests`` shape (10^6 requests), at most."""
PER_BYTE_TARGET = 2.0


def print_table(rows: list[tuple[str, int, float, dict[str, dict]]]) -> None:
    print(
        "| shape | lines | log GB | contestant | wall s | peak RssAnon MiB | JSON MB "
        "| fold's wall vs it |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    for shape, lines, size_gb, best in rows:
        fold_wall = best["fold"]["wall"]
        for name, report in best.items():
            ratio = "" if name == "fold" else f"{fold_wall / report['wall']:.2f}x"
            json_mb = f"{report['json_bytes'] / 1e6:.1f}" if "json_bytes" in report else ""
            print(
                f"| {shape} | {lines:,} | {size_gb:.2f} | {name} | {report['wall']:.2f} | "
                f"{report['peak_rss_anon_mib']:.0f} | {json_mb} | {ratio} |"
            )
    print()
    per_byte = {}
    for shape, lines, size_gb, best in rows:
        per_byte[(shape, lines)] = best["fold"]["wall"] / size_gb
        fold = best["fold"]
        memory = fold["peak_rss_anon_mib"]
        if shape == "requests":
            per_request = memory * 2**20 / max(1, fold["requests"])
            verdict = "met" if per_request <= REQUEST_BYTES_TARGET else "NOT met"
            print(
                f"- requests, {fold['requests']:,} requests: peak RssAnon {memory:.0f} MiB, "
                f"{per_request:.0f} bytes a request, target at most "
                f"{REQUEST_BYTES_TARGET}: {verdict}"
            )
            verdict = "met" if fold["json_bytes"] <= JSON_TARGET_BYTES else "NOT met"
            print(
                f"- requests: JSON document {fold['json_bytes'] / 1e6:.1f} MB, target at most "
                f"{JSON_TARGET_BYTES / 1e6:.0f} MB: {verdict}"
            )
        elif lines == 10_000_000:
            verdict = "met" if memory <= MEMORY_TARGET_MIB else "NOT met"
            print(
                f"- {shape}, {lines:,} lines: peak RssAnon {memory:.0f} MiB, target at most "
                f"{MEMORY_TARGET_MIB} MiB: {verdict}"
            )
        else:
            print(f"- {shape}, {lines:,} lines: peak RssAnon {memory:.0f} MiB")
        if "duckdb" in best:
            ratio = fold["wall"] / best["duckdb"]["wall"]
            target = TARGET_VS_DUCKDB[shape]
            verdict = "met" if ratio <= target else "NOT met"
            print(f"- {shape}: {ratio:.2f}x DuckDB's wall, target at most {target}: {verdict}")
            if "fold-baseline" in best:
                before = best["fold-baseline"]["wall"] / best["duckdb"]["wall"]
                print(f"- {shape}: the baseline's {before:.2f}x DuckDB's wall")
    for (shape, lines), seconds_per_gb in per_byte.items():
        layout = per_byte.get(("layout", lines))
        if shape == "other" and layout:
            ratio = seconds_per_gb / layout
            verdict = "met" if ratio <= PER_BYTE_TARGET else "NOT met"
            print(f"- other vs layout per byte: {ratio:.2f}x, target within 2x: {verdict}")


if __name__ == "__main__":
    if CHILD:
        _child(*sys.argv[2:])
    else:
        main()
