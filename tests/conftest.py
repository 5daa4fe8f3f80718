"""Session fixtures that build the C++ artifacts once, into a temporary directory, and the
engines the opt-in suites run, each made in one place whatever test asks for it first.

g++ is required: a missing compiler fails these fixtures (and the tests using them), it does not
skip them. Every build uses the instrument's warning flags with ``-Werror``.

The engines (llama.cpp with the hook, a real vLLM, the tiny models) are kept under
``$XDG_CACHE_HOME/fold-acceptance/`` (``~/.cache`` when unset) by the example scripts that make
them, and made there when missing: the engine and oracle suites need no earlier run, in any
order of files or tests. Each script holds a file lock while it makes its piece, so two
processes (two pytest-xdist workers, a test run beside a benchmark) make it once.
docs/suites.md says what a first run makes and how long it takes.
"""

from __future__ import annotations

import fcntl
import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTRUMENT = ROOT / "instrument"
CPP = ROOT / "tests" / "cpp"
EXAMPLES = ROOT / "examples"

WARNINGS = ["-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
SANITIZE = {
    "plain": ["-O2", "-pthread"],
    "tsan": ["-O1", "-g", "-fsanitize=thread", "-pthread"],
    "asan": [
        "-O1",
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        "-pthread",
    ],
}


def compile_cxx(args: list[str], *, compiler: str = "g++") -> str:
    """Runs the compiler; fails the test with its output on error; returns its stderr."""
    exe = shutil.which(compiler)
    if exe is None:
        pytest.fail(f"{compiler} is required to build the C++ instrument tests and was not found")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"{compiler} {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stderr


def shared_directory(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A directory of this test run that every pytest-xdist worker sees: the run's temporary
    root (each worker's own directories are below it), or the session's when not distributed.
    It is new for each run, so nothing in it is ever stale."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    directory = base / name
    directory.mkdir(exist_ok=True)
    return directory


def made_once(out: Path, make: Callable[[], str]) -> str:
    """``make()`` writes ``out`` and returns the compiler's stderr; run by the first worker
    that gets here, while the others wait on the lock and take what it made. The stderr is
    kept beside ``out``, written last, so it also marks a finished build."""
    said = out.with_name(out.name + ".stderr")
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not said.exists():
            said.write_text(make())
        return said.read_text()


@pytest.fixture(scope="session")
def cpp_build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_directory(tmp_path_factory, "cpp-build")


@pytest.fixture(scope="session")
def instrument_lib(cpp_build_dir: Path) -> Path:
    """A shared library exporting the instrument's C API (dflash_step_log_* for ctypes)."""
    out = cpp_build_dir / "libdflash_step_log.so"
    source = CPP / "step_log_lib.cc"
    made_once(
        out,
        lambda: compile_cxx(
            [*WARNINGS, "-O2", "-fPIC", "-shared", f"-I{INSTRUMENT}", str(source), "-o", str(out)]
        ),
    )
    return out


@pytest.fixture(scope="session")
def toy_engine(cpp_build_dir: Path) -> Path:
    """The example engine, built with the command examples/README.md documents."""
    out = cpp_build_dir / "toy_engine"
    source = ROOT / "examples" / "toy_engine.cc"
    made_once(
        out, lambda: compile_cxx([*WARNINGS, "-O2", f"-I{INSTRUMENT}", str(source), "-o", str(out)])
    )
    return out


@pytest.fixture(scope="session")
def step_log_drivers(cpp_build_dir: Path) -> dict[str, tuple[Path, str]]:
    """tests/cpp/step_log_driver.cc built plain, under TSan and under ASan+UBSan, in parallel.

    Maps the variant name to (binary, compiler stderr).
    """

    def build(variant: str) -> tuple[Path, str]:
        out = cpp_build_dir / f"step_log_driver-{variant}"
        args = [*WARNINGS, *SANITIZE[variant], f"-I{INSTRUMENT}", str(CPP / "step_log_driver.cc")]
        return out, made_once(out, lambda: compile_cxx([*args, "-o", str(out)]))

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(SANITIZE, pool.map(build, SANITIZE), strict=True))


def example(folder: str, name: str):
    """The script ``examples/FOLDER/NAME.py`` as a module, its folder on ``sys.path`` as when
    it runs (the scripts import their siblings by name)."""
    directory = str(EXAMPLES / folder)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def llamacpp_bin_dir() -> Path:
    """llama.cpp patched with the hook and built by ``examples/llamacpp/build.py`` (its
    binaries' directory, in its build tree): fetched and built into the cache when missing or
    when the patches, the header or the flags changed, else found there. ``$LLAMACPP_BIN_DIR``
    names binaries ``build.py`` built elsewhere instead (the gate scripts' ``--bin-dir``)."""
    if os.environ.get("LLAMACPP_BIN_DIR"):
        return Path(os.environ["LLAMACPP_BIN_DIR"])
    build = example("llamacpp", "build")
    return Path(build.ensure_built()["llama-server"]).parent


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GGUF models of ``examples/llamacpp/make_models.py`` (a target, its noisy copy as
    the draft, an unrelated one), written once per session: seeded, so the same every time."""
    make_models = example("llamacpp", "make_models")  # the engine extra: gguf, numpy
    directory = tmp_path_factory.mktemp("gguf-models")
    make_models.make_models(directory)
    return directory


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The python of a venv holding a real vLLM (``examples/vllm/install.py``): installed into
    the cache when missing, else found there."""
    return example("vllm", "install").ensure_installed()


@pytest.fixture(scope="session")
def vllm_model(vllm_python: Path) -> str:
    """The tiny model vLLM and llama.cpp run (``examples/vllm/make_model.py``, in vLLM's venv
    with the defaults the gate scripts use): trained into the cache when missing."""
    proc = subprocess.run(
        [str(vllm_python), str(EXAMPLES / "vllm" / "make_model.py")],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["model"]


@pytest.fixture(autouse=True)
def every_document_is_valid(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every result document a test makes, by ``to_json()`` (the command's --json writes
    what it returns), is validated against the schema before the test sees it.

    A test marked ``timed_documents`` holds the command to a processor-time budget (the
    fuzzer's rules) over documents of tens of MB; validating those in Python would spend the
    budget on the suite's own check, so there the documents are left to the other tests."""
    if request.node.get_closest_marker("timed_documents"):
        return
    from document_schema import validate

    from fold.folding.document import Document

    built = Document.to_json

    @functools.wraps(built)  # keeps its docstring, which the API page check reads
    def validated(self: Document) -> dict:
        document = built(self)
        validate(document)
        return document

    monkeypatch.setattr(Document, "to_json", validated)
