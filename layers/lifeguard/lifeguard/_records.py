"""Shared steps of the tolerant record parsers: JSON object in, one-line reason out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


def load_json_object(raw: str | bytes | Mapping[str, Any]) -> Mapping[str, Any] | str:
    """The record as a JSON object, or why it is not one."""
    data: object = raw
    if isinstance(raw, str | bytes):
        try:
            data = json.loads(raw)
        except ValueError as exc:
            return f"not JSON ({exc})"
    if not isinstance(data, Mapping):
        return "not a JSON object"
    return data


def describe_validation_error(exc: ValidationError) -> str:
    """The first error of a pydantic validation as `field.path: message (and N more)`."""
    errors = exc.errors()
    first = errors[0]
    location = ".".join(str(part) for part in first["loc"]) or "(record)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{location}: {first['msg']}{more}"
