"""The one JSON writer (``fold.present.output.dumps``) puts each object of an array of flat
objects on a line of its own, and an array of scalars on one line: the content is what orjson
writes indented, byte for byte as a second, simpler writer lays it out, and only the line
breaks differ from plain indentation."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fold.folding.leg_figures import plain
from fold.folding.log_fold import fold_acceptance
from fold.inputs.acceptance import Counts
from fold.present.output import dumps

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
INDENTED = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def reference(document: Any) -> bytes:
    """The same layout by a second route: each flat object of an array handed to orjson as a
    fragment of its own compact JSON, and orjson left to indent everything around it."""

    def flat(item: Any) -> bool:
        if isinstance(item, Counts):
            return True
        return isinstance(item, dict) and all(
            isinstance(value, (str, int, float, bool, type(None))) for value in item.values()
        )

    def walk(value: Any) -> Any:
        if isinstance(value, MappingProxyType):
            return walk(plain(value))  # what orjson's default would have made of it
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            if value and all(flat(item) for item in value):
                return [orjson.Fragment(orjson.dumps(item, default=plain)) for item in value]
            if all(type(item) in (str, int, float, bool, type(None)) for item in value):
                return orjson.Fragment(orjson.dumps(list(value)))  # an array of scalars
            return [walk(item) for item in value]
        return value

    return orjson.dumps(walk(document), default=plain, option=INDENTED)


# Keys and strings that look like JSON's own punctuation, or hold escapes and other scripts.
text = st.one_of(
    st.sampled_from(["", "}", "},{", "{", "]", "[", '"', "\\", "\n", "a},{b", 'wärm "b"']),
    st.text(max_size=8),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
flat_objects = st.dictionaries(text, scalars, max_size=4)
counts = st.builds(
    lambda s, p, a: Counts(s, p, min(a, p)),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
# Arrays of flat objects as the document holds them, and as a library caller might hand
# them over: typed count triples mixed in, tuples, read-only views.
flat_arrays = st.lists(st.one_of(flat_objects, counts), max_size=5)
documents = st.recursive(
    scalars | flat_arrays | flat_arrays.map(tuple) | counts,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(text, inner, max_size=4),
        st.dictionaries(text, inner, max_size=4).map(MappingProxyType),
    ),
    max_leaves=30,
)


@given(documents)
@settings(max_examples=400, deadline=None)
def test_the_layout_is_the_simple_writers_and_the_content_orjsons(document: Any) -> None:
    written = dumps(document)
    assert written == reference(document)
    # The content is what orjson wrote before the layout: a count triple as orjson writes a
    # dataclass, and one inside a read-only view as ``plain`` makes it.
    assert orjson.loads(written) == orjson.loads(orjson.dumps(document, default=plain))
    assert written.endswith(b"\n")


def test_a_count_triple_reads_the_same_in_a_tuple_and_in_a_list() -> None:
    triple = Counts(3, 4, 2)
    as_list, as_tuple = dumps({"w": [triple]}), dumps({"w": (triple,)})
    assert as_list == as_tuple
    assert orjson.loads(as_tuple) == orjson.loads(orjson.dumps({"w": (triple,)}, default=plain))


class Triple(NamedTuple):
    counts: Any


class Lookup(Mapping[str, int]):
    """A mapping that is neither a dict nor a read-only view: orjson refuses it."""

    def __getitem__(self, key: str) -> int:
        return {"a": 1}[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1


def test_tuple_subclasses_and_dataclasses_read_as_orjson_and_plain_write_them() -> None:
    """orjson hands a named tuple to ``plain`` (which writes a count triple's accept_rate)
    and writes a dataclass's fields itself: so does the layout, in and out of arrays."""
    triple = Counts(3, 4, 2)
    for document in (
        {"w": Triple(triple)},
        {"w": [Triple(triple)]},
        {"w": triple},
        {"w": [triple, {"steps": 1}], "v": MappingProxyType({"t": (triple,)})},
    ):
        assert orjson.loads(dumps(document)) == orjson.loads(orjson.dumps(document, default=plain))


def test_what_orjson_refuses_is_still_refused_as_orjson_refuses_it() -> None:
    for document in (
        {"rows": [{1: 2}]},
        {"rows": [{"a": 2**70}]},
        {"x": object()},
        {"x": Lookup()},
        {"rows": [Lookup()]},
        [MappingProxyType({2: "key not a string"})],
    ):
        try:
            orjson.dumps(document, default=plain)
        except TypeError as expected:
            with pytest.raises(TypeError, match=str(expected).split(":")[0]):
                dumps(document)
        else:
            raise AssertionError(f"orjson wrote {document!r}")


@given(st.lists(flat_objects, min_size=1, max_size=6), st.integers(0, 4))
@settings(max_examples=200, deadline=None)
def test_each_flat_object_is_one_line_at_its_depth(objects: list[dict[str, Any]], depth: int):
    document: Any = {"items": objects}
    for level in range(depth):
        document = {f"level {level}": document}
    # Split at "\n" only: str.splitlines() also breaks at U+0085 and U+2028, which JSON
    # strings may hold raw.
    lines = dumps(document).decode().split("\n")
    opening = next(i for i, line in enumerate(lines) if line.endswith('"items": ['))
    pad = " " * (2 * (depth + 2))
    for offset, item in enumerate(objects, start=1):
        line = lines[opening + offset]
        assert line.startswith(pad + "{") and not line.startswith(pad + " ")
        assert orjson.loads(line.strip().rstrip(",")) == orjson.loads(orjson.dumps(item))
    assert lines[opening + len(objects) + 1] == " " * (2 * (depth + 1)) + "]"


def test_a_legs_windows_take_a_line_a_figure_and_the_document_reads_the_same() -> None:
    result = fold_acceptance(str(FIXTURES / "our-arm.json"), [str(FIXTURES / "steps.jsonl")])
    document = result.to_json()
    written = dumps(document)
    assert orjson.loads(written) == orjson.loads(orjson.dumps(document, option=INDENTED))
    lines = written.decode().split("\n")
    windows = document["legs"][0]["windows"]
    assert len(windows["steps"]) >= 2, "the fixture's first leg has windows"
    opening = lines.index('      "windows": {')
    for offset, figure in enumerate(("steps", "proposed", "accepted", "accept_rate"), start=1):
        name, _, values = lines[opening + offset].strip().rstrip(",").partition(": ")
        assert (orjson.loads(name), orjson.loads(values)) == (figure, windows[figure])
    assert lines[opening + 5] == "      },"
    assert len(written) < len(orjson.dumps(document, option=INDENTED))


def test_nan_and_infinity_are_null_as_orjson_writes_them() -> None:
    document = {"rows": [{"rate": math.nan, "other": math.inf, "n": 1}]}
    assert orjson.loads(dumps(document)) == {"rows": [{"rate": None, "other": None, "n": 1}]}
