"""Fetch llama.cpp, patch the step-log hook into it and build, cached by version.

The llama.cpp source comes from the llama-cpp-python source package on PyPI, which vendors a
whole llama.cpp tree (0.3.36 carries ggml-org/llama.cpp 0c1e57098). Everything lives under
``$XDG_CACHE_HOME/fold-acceptance/llamacpp/<version>/`` (``~/.cache`` when unset): the package,
the source tree, the build tree and stamps of the applied patches and the configure flags. A
second run with nothing changed only asks ninja, which finds nothing to do: it takes seconds.
A changed patch or header rebuilds only what includes them.

    python examples/llamacpp/build.py                 # both patched targets
    python examples/llamacpp/build.py --hookless      # also the unpatched speculative-simple

It prints one JSON object: the binaries' paths, and how long it took.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HEADER = ROOT / "instrument" / "dflash_step_log.h"
VERSION = "0.3.36"
# The source package the patches are written against, by version: a tarball with another hash is
# refused rather than built.
SHA256 = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}
PATCHES = (HERE / "speculative-simple.patch", HERE / "server.patch")
TARGETS = ("llama-speculative-simple", "llama-server")
HOOKLESS = "llama-speculative-simple-hookless"
VENDORED = "vendor/llama.cpp/"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fold-acceptance" / "llamacpp"


def run(command: list[str], quiet: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """Runs a step; a quiet one shows its output only when it fails."""
    if not quiet:
        return subprocess.run(command, check=True, **kwargs)
    proc = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"build: {' '.join(command[:3])} ... failed with exit status {proc.returncode}")
    return proc


def fetch(cache: Path, version: str) -> Path:
    """The source package, downloaded once per version.

    pip reads a source package's metadata by building it, so it first installs the package's
    build requirements. ``--no-binary llama-cpp-python`` asks for the source of this package
    only: its build requirements come as wheels. ``--no-binary :all:`` would reach them too, and
    where no CMake is installed pip would compile CMake from source (over an hour on two cores)
    just to read a version string.
    """
    name = f"llama_cpp_python-{version}.tar.gz"
    tarball = cache / name
    if not tarball.exists():
        download = cache / "download"
        # Whatever an earlier, interrupted or refused, download left is not reused.
        shutil.rmtree(download, ignore_errors=True)
        download.mkdir(parents=True)
        package = f"llama-cpp-python=={version}"
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        run([*pip, "--no-binary", "llama-cpp-python", package, "-d", str(download)])
        found = download / name
        if not found.exists():
            sys.exit(f"build: pip did not download {name}")
        wanted = SHA256.get(version)
        digest = hashlib.sha256(found.read_bytes()).hexdigest()
        if wanted is not None and digest != wanted:
            sys.exit(
                f"build: {name} from pip has sha256 {digest}, not {wanted}: the patches are"
                f" written against the latter; check pip's index settings (pip config list)"
            )
        found.rename(tarball)
        shutil.rmtree(download)
    return tarball


def members(archive: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    """The vendored llama.cpp tree's members, by path relative to the tree."""
    result = {}
    for member in archive.getmembers():
        _, _, inner = member.name.partition("/")
        if inner.startswith(VENDORED) and len(inner) > len(VENDORED):
            result[inner[len(VENDORED) :]] = member
    return result


def extract(tarball: Path, source: Path) -> None:
    if (source / "CMakeLists.txt").exists():
        return
    partial = source.with_name(source.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        for relative, member in members(archive).items():
            target = partial / relative
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.extractfile(member) as data, open(target, "wb") as out:
                    shutil.copyfileobj(data, out)
                target.chmod(member.mode & 0o755 | 0o600)
    partial.rename(source)


def patched_files(text: str) -> set[str]:
    return {line[6:].strip() for line in text.splitlines() if line.startswith("+++ b/")}


def apply_patches(tarball: Path, source: Path, stamp: Path) -> bool:
    """Brings the tree to exactly these patches; True when anything changed."""
    wanted = "".join(patch.read_text() for patch in PATCHES)
    applied = stamp.read_text() if stamp.exists() else ""
    if applied == wanted:
        return False
    # Put back the pristine files of the old and new patches, then apply the new ones.
    restore = patched_files(applied) | patched_files(wanted)
    with tarfile.open(tarball) as archive:
        tree = members(archive)
        for relative in sorted(restore):
            with archive.extractfile(tree[relative]) as data:
                (source / relative).write_bytes(data.read())
    for patch in PATCHES:
        run(["patch", "--quiet", "-p1", "-d", str(source), "-i", str(patch)], quiet=True)
    stamp.write_text(wanted)
    return True


def sync_header(cache: Path) -> Path:
    """A copy of the header at a fixed path, so the build tree does not depend on a checkout."""
    directory = cache / "instrument"
    directory.mkdir(exist_ok=True)
    copy = directory / HEADER.name
    if not copy.exists() or copy.read_bytes() != HEADER.read_bytes():
        copy.write_bytes(HEADER.read_bytes())
    return directory


def configure(source: Path, build: Path, instrument: Path, stamp: Path) -> None:
    flags = [
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        # No network at build time: no prebuilt web UI, no HTTPS client.
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_CURL=OFF",
        "-DGGML_NATIVE=ON",
        f"-DDFLASH_INSTRUMENT_DIR={instrument}",
    ]
    if (build / "build.ninja").exists() and stamp.exists() and stamp.read_text() == str(flags):
        return
    run(["cmake", "-S", str(source), "-B", str(build), *flags], quiet=True)
    stamp.write_text(str(flags))


def build_hookless(source: Path, build: Path) -> Path:
    """speculative-simple without the hook, compiled and linked exactly as the patched one.

    The patched source less its hook lines (every line naming dflash: the include, the record
    call, the clock reads of the step's parts and the wait that ends the verify), built with
    the compile and link commands ninja uses for the patched target, so that a cost comparison
    differs only in the hook.
    """
    binary = build / "bin" / HOOKLESS
    relative = "examples/speculative-simple/speculative-simple.cpp"
    hookless = build / "hookless" / "speculative-simple.cpp"
    hookless.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(
        line
        for line in (source / relative).read_text().splitlines(keepends=True)
        if "dflash" not in line
    )
    if not hookless.exists() or hookless.read_text() != text:
        hookless.write_text(text)
    patched_binary = build / "bin" / "llama-speculative-simple"
    if binary.exists() and binary.stat().st_mtime >= max(
        hookless.stat().st_mtime, patched_binary.stat().st_mtime
    ):
        return binary
    commands = run(
        ["ninja", "-C", str(build), "-t", "commands", "llama-speculative-simple"],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    compile_line = next(line for line in commands if relative in line and " -c " in line)
    link_line = commands[-1]
    obj = "examples/speculative-simple/CMakeFiles/llama-speculative-simple.dir/"
    compile_line = compile_line.replace(str(source / relative), str(hookless)).replace(
        obj + "speculative-simple.cpp.o", "hookless/speculative-simple.cpp.o"
    )
    link_line = link_line.replace(
        obj + "speculative-simple.cpp.o", "hookless/speculative-simple.cpp.o"
    ).replace("bin/llama-speculative-simple", f"bin/{HOOKLESS}")
    run(["sh", "-c", compile_line], cwd=build)
    run(["sh", "-c", link_line], cwd=build)
    return binary


@contextlib.contextmanager
def locked(cache: Path):
    """One build at a time per cache: tests and benchmarks may start it together."""
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_built(
    version: str = VERSION, jobs: int = 2, hookless: bool = False, quiet: bool = True
) -> dict[str, str]:
    """Builds what is missing and returns the binaries' paths by target name."""
    for tool in ("cmake", "ninja", "patch"):
        if shutil.which(tool) is None:
            sys.exit(f"build: '{tool}' is needed (pip install cmake ninja; apt-get install patch)")
    cache = cache_root() / version
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache):
        tarball = fetch(cache, version)
        source, build = cache / "src", cache / "build"
        extract(tarball, source)
        apply_patches(tarball, source, cache / "applied.patch")
        instrument = sync_header(cache)
        configure(source, build, instrument, cache / "configure.flags")
        run(["ninja", "-C", str(build), f"-j{jobs}", *TARGETS], quiet=quiet)
        binaries = {target: str(build / "bin" / target) for target in TARGETS}
        if hookless:
            binaries[HOOKLESS] = str(build_hookless(source, build))
    return binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=VERSION, help="llama-cpp-python source package")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    parser.add_argument("--hookless", action="store_true", help=f"also build {HOOKLESS}")
    parser.add_argument("--verbose", action="store_true", help="show ninja's progress")
    args = parser.parse_args(argv)
    started = time.monotonic()
    binaries = ensure_built(args.version, args.jobs, args.hookless, quiet=not args.verbose)
    elapsed = round(time.monotonic() - started, 1)
    print(json.dumps({"version": args.version, "binaries": binaries, "seconds": elapsed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
