"""Read-only values for the result document: every dict a read-only view, every list a tuple,
all the way down (``frozen``, ``deep_frozen``), and the same for a frozen dataclass's fields
as it is built (``freeze_fields``). The JSON form turns them back into dicts and lists
(``fold.folding.leg_figures.plain``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

K = TypeVar("K")
V = TypeVar("V")


_ATOMS = (int, float, str, bool, type(None))
"""Values taken as they are, without a call: most of a request's figures are these."""


def frozen(value: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only view of a dict of figures (a request's, a cadence's), read-only all the way
    down (``deep_frozen``): cheaper than a type per record where a fold holds 10^6 of them, and
    as unchangeable to its readers."""
    if isinstance(value, MappingProxyType):
        return value  # made here, so already read-only all the way down
    nested = [key for key, item in value.items() if not isinstance(item, _ATOMS)]
    if not nested:
        # the builder's own dict, handed over: a view of it costs no copy (10^6 requests)
        return MappingProxyType(value)
    return MappingProxyType({**value, **{key: deep_frozen(value[key]) for key in nested}})


def deep_frozen(value: Any) -> Any:
    """Every dict a read-only view and every list a tuple, all the way down; figure types,
    scalars and views made here (already frozen all the way down) as they are."""
    if isinstance(value, (*_ATOMS, MappingProxyType)):
        return value
    if isinstance(value, dict):
        return frozen(value)
    if isinstance(value, (list, tuple)):
        return tuple(item if isinstance(item, _ATOMS) else deep_frozen(item) for item in value)
    if isinstance(value, np.ndarray) and value.flags.writeable:
        # a read-only view: the bootstrap's draws are figures too, and an interval computed
        # later (a comparison's) reads them
        view = value.view()
        view.flags.writeable = False
        return view
    return value


def freeze_fields(instance: Any, names: Iterable[str]) -> None:
    """In a frozen dataclass's ``__post_init__``: each named field made read-only all the way
    down, whatever its builder handed in (a dict, a list)."""
    for name in names:
        object.__setattr__(instance, name, deep_frozen(getattr(instance, name)))
