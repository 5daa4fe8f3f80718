"""The engines an oracle arm can come from. A new engine is one module with ``KIND``,
``ALIASES``, ``sniff(doc) -> bool`` and ``read(name, doc) -> ArmFigures``, and one line here."""

from __future__ import annotations

from types import ModuleType

from fold.inputs.oracles import llamacpp, sglang, vllm

ENGINES: dict[str, ModuleType] = {
    vllm.KIND: vllm,
    sglang.KIND: sglang,
    llamacpp.KIND: llamacpp,
}

KINDS = tuple(ENGINES)
ALIASES = {alias: module.KIND for module in ENGINES.values() for alias in module.ALIASES}
