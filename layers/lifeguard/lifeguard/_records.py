"""Shared steps of the tolerant record parsers: JSON object in, one-line reason out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lifeguard.schema import Invalid, Problem

# How a value of the wrong kind is worded when it was read from JSON text: an object, an array, as JSON
# names them, rather than as the Python values they became. The words skip reasons and error lines have
# always used for records read from text.
_JSON_WORDING = {
    "model_type": "Input should be an object",
    "dict_type": "Input should be an object",
    "list_type": "Input should be a valid array",
}


class DuplicateKeyError(ValueError):
    """A JSON object that gives a key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key[:50]!r}")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members (`json.loads`' `object_pairs_hook`), each key once: an object that gives one
    twice is ambiguous (readers differ on which value holds: `json.loads` keeps the last), so no record is
    read from one. Raises DuplicateKeyError."""
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return made


def load_json_object(raw: str | bytes | Mapping[str, Any]) -> Mapping[str, Any] | str:
    """The record as a JSON object, or why it is not one."""
    data: object = raw
    if isinstance(raw, str | bytes):
        try:
            data = json.loads(raw, object_pairs_hook=unique_keys)
        except DuplicateKeyError as exc:
            return f"duplicate key ({exc.key[:50]!r} given twice: which value holds is ambiguous)"
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
            return f"not JSON ({str(exc)[:100]})"
    if not isinstance(data, Mapping):
        return "not a JSON object"
    return data


def reason_of(problem: str | Invalid) -> str:
    """The short reason a record is skipped, for counting: `not JSON`, `not a JSON object`,
    `missing status_code`, `invalid details.instance_id`, … (the first problem of a validation)."""
    if isinstance(problem, str):
        return problem.split(" (", 1)[0]
    first = problem.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        return "not JSON"
    if not location:
        return "not a JSON object"
    return f"{'missing' if first['type'] == 'missing' else 'invalid'} {location}"


class ValidationProblems(Protocol):
    """A failed validation: `Invalid`, or pydantic's `ValidationError` (the CLI's models)."""

    def errors(self) -> Sequence[Mapping[str, Any]]:
        """Each problem's `loc`, `type` and `msg`."""
        ...


def describe_validation_error(exc: ValidationProblems) -> str:
    """The first problem of a validation as `field.path: message (and N more)` (just the message when it
    is about the whole value)."""
    errors = exc.errors()
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location}: {first['msg']}{more}" if location else f"{first['msg']}{more}"


def read_from_json(exc: Invalid) -> Invalid:
    """The problems of values read from JSON text, worded as JSON names their kinds (`Input should be an
    object`, not `… a valid dictionary or instance of ScalingLogDetails`)."""
    return Invalid(
        [
            Problem(problem.loc, problem.type, _JSON_WORDING.get(problem.type, problem.msg))
            for problem in exc.problems
        ]
    )
