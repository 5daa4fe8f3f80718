"""Take the README's screenshot again: the first screen of the worked example's --html page.

    python docs/screenshot.py [--out docs/worked-example-page.png]

It writes the page of the README's worked example with this Python's fold-acceptance and opens
it in Debian's headless Chromium (`apt-get install -y chromium`) from a file, with every
connection refused, so the shot shows what a reader sees when opening the page off-line.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "worked-example-page.png"
# The README's worked example, as typed there.
EXAMPLE = [
    "fixtures/gate-example/our-arm.json",
    "fixtures/gate-example/steps.jsonl",
    "--vs",
    "vllm=fixtures/oracles/vllm-gate-arm.json",
    "--vs",
    "sglang=fixtures/oracles/sglang-legs.jsonl",
]
# One laptop screen: what a reader sees before scrolling.
WINDOW = (1280, 800)  # the first screen the browser test holds the answer to


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    options = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshot: chromium is not installed: apt-get install -y chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        subprocess.run(
            [sys.executable, "-m", "fold.cli", *EXAMPLE, "--html", str(page), "--quiet"],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        shot = Path(scratch) / "shot.png"
        completed = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--proxy-server=127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "--virtual-time-budget=10000",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if not shot.exists():
            error = completed.stderr[-2000:]
            print(f"screenshot: chromium wrote no image:\n{error}", file=sys.stderr)
            return 1
        options.out.write_bytes(shot.read_bytes())
    print(f"wrote {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
