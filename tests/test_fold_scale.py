"""benchmarks/fold_scale.py runs each contestant as the command runs: polars, loaded in the
script, puts its own allocator setting in the environment, and a contestant that inherited it
kept freed pages the command hands back at once (its peaks were measured too high); repeated
runs keep the fastest wall and the highest peak."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "fold_scale.py"


def _script():
    spec = importlib.util.spec_from_file_location("fold_scale_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_contestant_does_not_inherit_polars_allocator_setting():
    script = _script()
    polars_own = {script.ALLOCATOR: "dirty_decay_ms:500,muzzy_decay_ms:1000", "HOME": "/h"}
    found = script.contestant_environment("fold", polars_own, None)
    assert script.ALLOCATOR not in found and found["HOME"] == "/h"
    users = script.contestant_environment("fold", polars_own, "dirty_decay_ms:7")
    assert users[script.ALLOCATOR] == "dirty_decay_ms:7"


def test_the_script_sees_polars_setting_after_loading_it():
    """What the fix is for: in a fresh process with no setting, loading the script leaves
    polars' own in the environment, and the script still knows the user had none."""
    code = (
        "import importlib.util, os, sys; "
        f"spec = importlib.util.spec_from_file_location('s', {str(SCRIPT)!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        "print(m.USER_ALLOCATOR, bool(os.environ.get(m.ALLOCATOR)))"
    )
    environment = {"PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True
    )
    assert run.stdout.split() == ["None", "True"]


def test_repeated_runs_keep_the_fastest_wall_and_the_highest_peak():
    script = _script()
    runs = [
        {"wall": 3.0, "peak_rss_anon_mib": 400.0, "figures": "a"},
        {"wall": 2.0, "peak_rss_anon_mib": 380.0, "figures": "b"},
        {"wall": 2.5, "peak_rss_anon_mib": 450.0, "figures": "c"},
    ]
    assert script.kept(runs) == {"wall": 2.0, "peak_rss_anon_mib": 450.0, "figures": "b"}
    assert script.kept(runs[:1]) == runs[0]
