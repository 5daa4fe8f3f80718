"""Read-only values for the result document: every dict a read-only view, every list a tuple,
all the way down (``frozen``, ``deep_frozen``), and the same for a frozen dataclass's fields
as it is built (``freeze_fields``). The JSON form turns them back into dicts and lists
(``fold.folding.leg_figures.plain``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def frozen(value: Mapping[K, V]) -> Mapping[K, V]:
    """A read-only view of a dict of figures (a request's, a cadence's), read-only all the way
    down (``deep_frozen``): cheaper than a type per record where a fold holds 10^6 of them, and
    as unchangeable to its readers."""
    return MappingProxyType({key: deep_frozen(item) for key, item in value.items()})


def deep_frozen(value: Any) -> Any:
    """Every dict a read-only view and every list a tuple, all the way down; figure types and
    scalars as they are (the figure types are frozen dataclasses)."""
    if isinstance(value, MappingProxyType):
        return value if all(_is_frozen(item) for item in value.values()) else frozen(value)
    if isinstance(value, dict):
        return frozen(value)
    if isinstance(value, (list, tuple)):
        return tuple(deep_frozen(item) for item in value)
    return value


def freeze_fields(instance: Any, names: Iterable[str]) -> None:
    """In a frozen dataclass's ``__post_init__``: each named field made read-only all the way
    down, whatever its builder handed in (a dict, a list)."""
    for name in names:
        object.__setattr__(instance, name, deep_frozen(getattr(instance, name)))


def _is_frozen(value: Any) -> bool:
    if isinstance(value, (dict, list, set)):
        return False
    if isinstance(value, MappingProxyType):
        return all(_is_frozen(item) for item in value.values())
    if isinstance(value, tuple):
        return all(_is_frozen(item) for item in value)
    return True
