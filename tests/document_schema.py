"""The JSON document's schema (``docs/fold-acceptance-5.schema.json``), as the suite holds every
document it makes to it."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "fold-acceptance-5.schema.json"


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(document: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` (a dict, or its JSON bytes) is
    a valid document. A dict is checked as the JSON it serializes to: what a reader gets."""
    data = document if isinstance(document, (bytes, str)) else orjson.dumps(document)
    error = jsonschema.exceptions.best_match(validator().iter_errors(orjson.loads(data)))
    if error is not None:
        raise error
