"""botocore's PCS service model, shipped with the layer, and a validator that checks any JSON value
against any of its shapes.

The model file is botocore's own `pcs/2023-02-10/service-2.json.gz`, byte for byte (a test compares it
with the installed botocore's). It is the single source of PCS's rules: the lifecycle models, the node's
config check and the local PCS endpoint all validate through `validate_shape`. `DATA_PATH` is laid out as
a botocore data path, so a client built with it knows `nodeLifecycleActions` even where the runtime's
botocore is older than the feature.

Runs on Python 3.9 too: the node bundle checks configs with it on the node's own Python.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from lifeguard.errors import Problem, ServiceModelError

__all__ = [
    "API_VERSION",
    "DATA_PATH",
    "LEFT_OUT",
    "PATTERN_HINTS",
    "join_path",
    "json_type_name",
    "left_out_shown",
    "service_model",
    "shape",
    "validate_shape",
]

API_VERSION = "2023-02-10"
# What PCS does when a script leaves a field out (PCS user guide, "node lifecycle actions"; the model does
# not say): the rules, the node's executor and every message that shows a field left out go by these.
LEFT_OUT = {"onError": "TERMINATE", "executionPolicy": "FIRST_BOOT_ONLY", "scriptCachingPolicy": "CACHE_ONCE"}
_MODEL_RESOURCE = f"data/pcs/{API_VERSION}/service-2.json.gz"
# A directory where the package is unpacked (the layer, the CLI); in the node bundle's zip, only the model's
# bytes are read, through the loader that read this module (what pkgutil.get_data does, without its imports).
DATA_PATH = Path(__file__).resolve().parent / "data"


def left_out_shown(field: str) -> str:
    """A field a configuration leaves out, as people are shown it: what PCS does then (`TERMINATE
    (default)`), or `(unset)` for one PCS has no default for."""
    default = LEFT_OUT.get(field)
    return f"{default} (default)" if default else "(unset)"


@cache
def service_model() -> Mapping[str, Any]:
    """The PCS service model as botocore ships it (parsed once per process)."""
    try:
        loader: Any = __spec__.loader  # a directory's loader, or the bundle's zipimporter
        raw = loader.get_data(os.path.join(os.path.dirname(__file__), _MODEL_RESOURCE))
        # wbits 31: zlib reads the gzip member itself, so a boot does not import the gzip module
        model: dict[str, Any] = json.loads(zlib.decompress(raw, 31))
    except (OSError, ValueError, zlib.error) as exc:
        raise ServiceModelError(f"cannot read the PCS service model {_MODEL_RESOURCE}: {exc}") from exc
    return model


def shape(name: str) -> Mapping[str, Any]:
    """One shape of the PCS model by name, e.g. `NodeLifecycleScript`."""
    try:
        found: Mapping[str, Any] = service_model()["shapes"][name]
    except KeyError:
        raise ServiceModelError(f"the PCS service model has no shape {name!r}") from None
    return found


@cache
def _pattern(expression: str) -> re.Pattern[str]:
    # The model's patterns are ECMAScript's: `\w` and `\d` mean ASCII, as in Python only with re.ASCII; and
    # `.` matches no line terminator, where Python's `.` matches all but `\n` (`s3://b/a\rb` would pass).
    return re.compile(_ecmascript_dot(expression), re.ASCII)


_LINE_TERMINATORS = "[^\n\r\u2028\u2029]"  # what `.` matches in ECMAScript (and in Java, but for U+0085)


def _ecmascript_dot(expression: str) -> str:
    """`expression` with each `.` that means any character (not escaped, not in a class) as ECMAScript's."""
    out, escaped, in_class = [], False, False
    for char in expression:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "." and not in_class:
            out.append(_LINE_TERMINATORS)
            continue
        out.append(char)
    return "".join(out)


def json_type_name(value: object) -> str:
    """The JSON name of a value's type, as users know it from their files."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def join_path(path: str, member: str) -> str:
    """`path.member`, or `member` at the document's root."""
    return f"{path}.{member}" if path else member


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def validate_shape(shape_name: str, value: object, path: str = "") -> list[Problem]:
    """Every way `value` breaks the PCS model's shape `shape_name`, each with its JSON path.

    Checks what botocore would refuse to send (types, required and unknown members) and what the model's
    constraints say AWS rejects (enums, lengths, counts, patterns, matched against the whole string).
    """
    problems: list[Problem] = []
    _walk(shape_name, value, path, problems)
    return problems


def _walk(shape_name: str, value: object, path: str, out: list[Problem]) -> None:
    spec = shape(shape_name)
    kind = spec["type"]
    if kind == "structure":
        _walk_structure(shape_name, spec, value, path, out)
    elif kind == "list":
        _walk_list(spec, value, path, out)
    elif kind == "map":
        _walk_map(spec, value, path, out)
    elif kind == "string":
        _check_string(shape_name, spec, value, path, out)
    elif kind in ("integer", "long"):
        _check_integer(spec, value, path, out)
    elif kind == "boolean":
        if not isinstance(value, bool):
            out.append(Problem(path, f"expected a boolean, got {json_type_name(value)}"))
    elif kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out.append(Problem(path, f"expected a number, got {json_type_name(value)}"))
    elif kind == "timestamp":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            out.append(Problem(path, f"expected a timestamp, got {json_type_name(value)}"))
    elif kind == "blob" and not isinstance(value, (str, bytes)):
        out.append(Problem(path, f"expected base64 data, got {json_type_name(value)}"))


def _walk_structure(
    shape_name: str, spec: Mapping[str, Any], value: object, path: str, out: list[Problem]
) -> None:
    if not isinstance(value, Mapping):
        out.append(Problem(path, f"expected an object, got {json_type_name(value)}"))
        return
    members: Mapping[str, Any] = spec.get("members", {})
    out.extend(
        Problem(join_path(path, name), "is required")
        for name in spec.get("required", ())
        if name not in value
    )
    for key, item in value.items():
        if key not in members:
            known = ", ".join(members)
            out.append(Problem(join_path(path, str(key)), f"is not a field of {shape_name} (known: {known})"))
            continue
        _walk(members[key]["shape"], item, join_path(path, key), out)


def _check_count(spec: Mapping[str, Any], count: int, noun: str, path: str, out: list[Problem]) -> None:
    if "min" in spec and count < spec["min"]:
        out.append(Problem(path, f"has {noun}; at least {spec['min']} required"))
    if "max" in spec and count > spec["max"]:
        out.append(Problem(path, f"has {noun}; at most {spec['max']} allowed"))


def _walk_list(spec: Mapping[str, Any], value: object, path: str, out: list[Problem]) -> None:
    if not isinstance(value, (list, tuple)):
        out.append(Problem(path, f"expected an array, got {json_type_name(value)}"))
        return
    _check_count(spec, len(value), _plural(len(value), "item"), path, out)
    for index, item in enumerate(value):
        _walk(spec["member"]["shape"], item, f"{path}[{index}]", out)


def _walk_map(spec: Mapping[str, Any], value: object, path: str, out: list[Problem]) -> None:
    if not isinstance(value, Mapping):
        out.append(Problem(path, f"expected an object, got {json_type_name(value)}"))
        return
    _check_count(spec, len(value), _plural(len(value), "entry", "entries"), path, out)
    for key, item in value.items():
        entry = f"{path}[{json.dumps(key)}]"
        _walk(spec["key"]["shape"], key, entry, out)
        _walk(spec["value"]["shape"], item, entry, out)


# What a pattern means, for the shapes people write by hand; others are shown as the pattern itself.
PATTERN_HINTS: Mapping[str, str] = {
    "NodeLifecycleScriptNameString": "must start with a letter or digit and hold only letters, digits, "
    "spaces, '_' and '-'",
    "ScriptSourceScriptLocationString": "must be an s3://bucket/key or an https://host/path URL (a bucket "
    "of 3 to 63 lowercase letters, digits, '.' and '-'; a host with its domain, as example.com)",
    "ScriptSourceChecksumString": "must be a sha256 digest: 64 hexadecimal characters",
    "ComputeNodeGroupName": "must start with a letter, hold only letters, digits and '-', "
    "and not start with 'pcs_'",
    "ClusterName": "must start with a letter, hold only letters, digits and '-', and not start with 'pcs_'",
}


def _check_string(
    shape_name: str, spec: Mapping[str, Any], value: object, path: str, out: list[Problem]
) -> None:
    if not isinstance(value, str):
        out.append(Problem(path, f"expected a string, got {json_type_name(value)}"))
        return
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): no UTF-8 request can carry it
            out.append(Problem(path, "is not Unicode text (it holds a lone surrogate)"))
            return
    if "enum" in spec:
        if value not in spec["enum"]:
            out.append(Problem(path, f"{_shorten(value)!r} is not one of {', '.join(spec['enum'])}"))
        return
    length = len(value)
    if "min" in spec and length < spec["min"]:
        out.append(Problem(path, f"is {_plural(length, 'character')} long; at least {spec['min']} required"))
    elif "max" in spec and length > spec["max"]:
        out.append(Problem(path, f"is {_plural(length, 'character')} long; at most {spec['max']} allowed"))
    else:
        pattern = spec.get("pattern")
        if pattern is not None and _pattern(pattern).fullmatch(value) is None:
            hint = PATTERN_HINTS.get(shape_name, f"does not match the pattern {pattern}")
            out.append(Problem(path, f"{_shorten(value)!r} {hint}"))


def _check_integer(spec: Mapping[str, Any], value: object, path: str, out: list[Problem]) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        out.append(Problem(path, f"expected an integer, got {json_type_name(value)}"))
        return
    if "min" in spec and value < spec["min"]:
        out.append(Problem(path, f"is {value}; at least {spec['min']} required"))
    if "max" in spec and value > spec["max"]:
        out.append(Problem(path, f"is {value}; at most {spec['max']} allowed"))


def _shorten(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"
