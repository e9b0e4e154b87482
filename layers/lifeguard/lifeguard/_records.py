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


def load_json_object(raw: str | bytes | Mapping[str, Any]) -> Mapping[str, Any] | str:
    """The record as a JSON object, or why it is not one."""
    data: object = raw
    if isinstance(raw, str | bytes):
        try:
            data = json.loads(raw)
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
