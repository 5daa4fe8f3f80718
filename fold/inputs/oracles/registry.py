"""The engines an oracle arm can come from. A new engine is one module with ``KIND``,
``ALIASES``, ``sniff(doc) -> bool`` and ``read(name, doc) -> ArmFigures``, and one line here.

A format of a known engine that its own module reads (same ``sniff`` and ``read``, the
engine's ``KIND``) is one line in ``FORMATS``: it is tried before the engine's module."""

from __future__ import annotations

from types import ModuleType

from fold.inputs.oracles import llamacpp, sglang, vllm, vllm_requests
from fold.inputs.oracles.source import OracleFile

ENGINES: dict[str, ModuleType] = {
    vllm.KIND: vllm,
    sglang.KIND: sglang,
    llamacpp.KIND: llamacpp,
}

KINDS = tuple(ENGINES)
ALIASES = {alias: module.KIND for module in ENGINES.values() for alias in module.ALIASES}

FORMATS: dict[str, tuple[ModuleType, ...]] = {
    vllm.KIND: (vllm_requests,),
}

SOURCES = tuple(
    f"{module.KIND}:{code}"
    for module in (*ENGINES.values(), *(m for formats in FORMATS.values() for m in formats))
    for code in module.SOURCES
)
"""Every format an oracle arm is read from, ``KIND:CODE``: each module lists what its ``read``
reads (``SOURCES``), and ``tests/test_limits.py`` sends a bad value through each."""


def reader(kind: str, doc: OracleFile) -> ModuleType:
    """The module that reads ``doc`` of engine ``kind``: a format of its own, else the
    engine's."""
    for module in FORMATS.get(kind, ()):
        if module.sniff(doc):
            return module
    return ENGINES[kind]


def shows(kind: str, doc: OracleFile) -> bool:
    """Whether ``doc``'s content shows engine ``kind``, in any of its formats."""
    return ENGINES[kind].sniff(doc) or any(module.sniff(doc) for module in FORMATS.get(kind, ()))
