"""Declared, bounded fields for every value Lifeguard reads from outside, checked without a model library.

A record class is a slotted dataclass (`lifeguard.values`) deriving from `Model`, with a check per field
given to `checked`:

    @checked(instance_id=string(pattern=INSTANCE_ID_PATTERN), event_timestamp=integer(ge=0))
    @mutable(slots=True, kw_only=True)
    class Failure(Model):
        instance_id: str
        event_timestamp: int

`Failure.model_validate(data)` checks every field and reports every problem at once (`Invalid`), each
with where it is (`loc`: keys and list indexes), a short `type` and a message in the words pydantic uses
(`Input should be a valid integer`, `String should match pattern '…'`), so error lines and skip reasons
read as they always have. The methods a record has are the part of pydantic's `BaseModel` interface
Lifeguard uses: `model_validate`, `model_validate_json`, `model_dump`, `model_dump_json`, `model_copy`.

Why not pydantic: its import and the build of its models cost each Lambda's cold start 50-170 ms (most of
what a cold start added to boto3), and every handler needs its models on its first event. Checks here are
strict: an integer is an `int` (not a bool, not text), a string a `str`, a list a list (or tuple); unknown
keys are ignored unless the class forbids them.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, fields
from operator import attrgetter
from typing import Any, ClassVar, Final, NamedTuple, TypeVar

__all__ = [
    "BAD",
    "Check",
    "Invalid",
    "Model",
    "Problem",
    "anything",
    "as_json",
    "boolean",
    "checked",
    "converted",
    "dict_of",
    "encode_json",
    "integer",
    "json_object",
    "list_of",
    "literal",
    "model",
    "number",
    "optional",
    "slot_setters",
    "string",
]

Loc = tuple[str | int, ...]


class Problem(NamedTuple):
    """One value that failed its check: where (`loc`), what kind of failure (`type`) and why (`msg`)."""

    loc: Loc
    type: str
    msg: str


class Invalid(ValueError):
    """Values that failed their checks, every problem in the order the fields are declared."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0]
        where = ".".join(str(part) for part in first.loc)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{where}: {first.msg}{more}" if where else f"{first.msg}{more}")

    def errors(self) -> list[dict[str, Any]]:
        """The problems as pydantic's `ValidationError.errors()` lists them (`loc`, `type`, `msg`)."""
        return [problem._asdict() for problem in self.problems]


class _Bad:
    __slots__ = ()

    def __repr__(self) -> str:
        return "BAD"


# What a check returns when it added a problem (a check never raises on what it is given; a `converted`
# one reports its conversion's ValueError as a problem).
BAD: Final = _Bad()

# A check takes a value, where it is, and the problems found so far; it returns the value to keep (maybe
# converted), or BAD after adding at least one problem.
Check = Callable[[Any, Loc, list[Problem]], Any]


def _fail(problems: list[Problem], loc: Loc, kind: str, message: str) -> Any:
    problems.append(Problem(loc, kind, message))
    return BAD


def integer(
    *, ge: int | None = None, gt: int | None = None, le: int | None = None, lt: int | None = None
) -> Check:
    """An `int` (not a bool), within the bounds given."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if type(value) is not int:
            return _fail(problems, loc, "int_type", "Input should be a valid integer")
        return _bounded(value, loc, problems, (ge, gt, le, lt))

    return check


def number(
    *, ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None
) -> Check:
    """A finite `float` (an `int` is taken as one; a bool is not)."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if type(value) is not float and type(value) is not int:
            return _fail(problems, loc, "float_type", "Input should be a valid number")
        try:
            number = float(value)  # an int past a float's range raises
        except OverflowError:
            return _fail(problems, loc, "float_type", "Input should be a valid number")
        if not math.isfinite(number):
            return _fail(problems, loc, "finite_number", "Input should be a finite number")
        return _bounded(number, loc, problems, (ge, gt, le, lt))

    return check


def _bounded(
    value: Any,
    loc: Loc,
    problems: list[Problem],
    bounds: tuple[float | None, float | None, float | None, float | None],
) -> Any:
    ge, gt, le, lt = bounds
    if ge is not None and value < ge:
        return _fail(problems, loc, "greater_than_equal", f"Input should be greater than or equal to {ge}")
    if gt is not None and value <= gt:
        return _fail(problems, loc, "greater_than", f"Input should be greater than {gt}")
    if le is not None and value > le:
        return _fail(problems, loc, "less_than_equal", f"Input should be less than or equal to {le}")
    if lt is not None and value >= lt:
        return _fail(problems, loc, "less_than", f"Input should be less than {lt}")
    return value


def boolean() -> Check:
    """`true` or `false`, nothing that merely reads as one."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if type(value) is not bool:
            return _fail(problems, loc, "bool_type", "Input should be a valid boolean")
        return value

    return check


# A lone surrogate (`"\ud800"` in JSON) is text no UTF-8 can hold: DynamoDB, SNS and Slack would refuse
# the write or message that carried it. A bounded string refuses one, as pydantic's did; an unbounded one
# takes it, as pydantic's did (a log tail's cut then reports it: `converted`).
_NOT_UNICODE = "Input should be a valid string, unable to parse raw data as a unicode string"


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


_ACCEPTED_MAX = 4096  # values remembered per pattern check (each at most its check's max_length)


def _characters(count: int) -> str:
    return f"{count} character" if count == 1 else f"{count} characters"


def string(
    *, min_length: int | None = None, max_length: int | None = None, pattern: str | None = None
) -> Check:
    """A `str` of `min_length` to `max_length` characters in which `pattern` is found (give patterns
    anchored, as `lifeguard.bounds` does: the lengths are checked first, so no pattern runs on a long
    string). Constrained text must be Unicode: a lone surrogate is refused before anything else."""
    # `$` ends the text, as in pydantic's patterns and in the PCS model's; Python's would also match before
    # a final newline, and let `pcs_abc\n` pass for an id.
    search = re.compile(re.sub(r"(?<!\\)\$$", r"\\Z", pattern)).search if pattern is not None else None
    # Values already found valid: ids and codes recur in every batch, and a set lookup is a tenth of a
    # pattern search. Bounded: emptied when full.
    accepted: set[str] = set()
    constrained = min_length is not None or max_length is not None or search is not None

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if type(value) is not str:
            return _fail(problems, loc, "string_type", "Input should be a valid string")
        if value in accepted:
            return value
        # Text that is not Unicode (a lone surrogate) is refused as such before its length, as pydantic
        # reads a string before it measures it.
        if constrained and not value.isascii() and not _encodes(value):
            return _fail(problems, loc, "string_unicode", _NOT_UNICODE)
        if min_length is not None and len(value) < min_length:
            message = f"String should have at least {_characters(min_length)}"
            return _fail(problems, loc, "string_too_short", message)
        if max_length is not None and len(value) > max_length:
            message = f"String should have at most {_characters(max_length)}"
            return _fail(problems, loc, "string_too_long", message)
        if search is not None:
            if search(value) is None:
                message = f"String should match pattern '{pattern}'"
                return _fail(problems, loc, "string_pattern_mismatch", message)
            if len(accepted) >= _ACCEPTED_MAX:
                accepted.clear()
            accepted.add(value)
        return value

    return check


def literal(*choices: str) -> Check:
    """One of `choices` exactly."""
    allowed = frozenset(choices)
    quoted = [repr(choice) for choice in choices]
    expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    message = f"Input should be {expected}"

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if type(value) is not str or value not in allowed:
            if type(value) is str and not value.isascii() and not _encodes(value):
                return _fail(problems, loc, "string_unicode", _NOT_UNICODE)
            return _fail(problems, loc, "literal_error", message)
        return value

    return check


def optional(inner: Check) -> Check:
    """None, or what `inner` takes."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        return None if value is None else inner(value, loc, problems)

    return check


def converted(inner: Check, convert: Callable[[Any], Any]) -> Check:
    """What `inner` takes, then passed through `convert` (e.g. a log tail cut to its bound)."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        value = inner(value, loc, problems)
        if value is BAD:
            return BAD
        try:
            return convert(value)
        except ValueError as exc:  # as pydantic reports a validator's error
            return _fail(problems, loc, "value_error", f"Value error, {exc}")

    return check


def list_of(item: Check, *, max_length: int | None = None, as_tuple: bool = False) -> Check:
    """A list (or tuple) of at most `max_length` values, each taken by `item`; kept as a list, or a tuple."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if not isinstance(value, list | tuple):
            return _fail(problems, loc, "list_type", "Input should be a valid list")
        if max_length is not None and len(value) > max_length:
            message = f"List should have at most {max_length} items after validation, not {len(value)}"
            return _fail(problems, loc, "too_long", message)
        kept = [item(entry, (*loc, index), problems) for index, entry in enumerate(value)]
        if any(entry is BAD for entry in kept):
            return BAD
        return tuple(kept) if as_tuple else kept

    return check


def dict_of(key: Check, item: Check) -> Check:
    """A JSON object whose keys `key` takes and whose values `item` takes (a copy is kept)."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if not isinstance(value, dict):
            return _fail(problems, loc, "dict_type", "Input should be a valid dictionary")
        kept = {key(k, (*loc, str(k)), problems): item(v, (*loc, str(k)), problems) for k, v in value.items()}
        if BAD in kept or any(entry is BAD for entry in kept.values()):
            return BAD
        return kept

    return check


def anything() -> Check:
    """Any value, kept as it is."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        return value

    return check


def json_object() -> Check:
    """A JSON object with text keys, whatever it holds (a shallow copy is kept)."""

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if not isinstance(value, dict) or not all(type(k) is str for k in value):
            return _fail(problems, loc, "dict_type", "Input should be a valid dictionary")
        return dict(value)

    return check


M = TypeVar("M", bound="Model")


def model(cls: type[Model]) -> Check:
    """A record of `cls` (an object, checked field by field), or an instance of it as it is."""
    message = f"Input should be a valid dictionary or instance of {cls.__name__}"

    def check(value: Any, loc: Loc, problems: list[Problem]) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            return _fail(problems, loc, "model_type", message)
        return cls.__schema__.build(value, loc, problems)

    return check


class _Field(NamedTuple):
    name: str
    key: str  # as the record spells it (an alias such as `scriptLocation`, else the name)
    check: Check
    required: bool
    path: Loc  # where the field is in a record at the top: `(key,)`


class Schema:
    """The checks of a record class, in the order its fields are declared."""

    def __init__(self, cls: type[Model], fields_: tuple[_Field, ...], *, forbid_extra: bool) -> None:
        self.cls = cls
        self.fields = fields_
        self.slots = tuple(field.name for field in fields(cls))  # type: ignore[arg-type]
        self.keys = frozenset(field.key for field in fields_)
        self.key_of = {field.name: field.key for field in fields_}
        self.dump_keys = tuple(field.key for field in fields_)
        names = [field.name for field in fields_]
        # The values of the checked fields, in their order, in one call (`json_fields`).
        self.values: Callable[[Any], tuple[Any, ...]] = (
            attrgetter(*names) if len(names) > 1 else lambda record: (getattr(record, names[0]),)
        )
        self.forbid_extra = forbid_extra
        self.check = model(cls)  # a record of the class, as `model_validate` takes one

    def build(self, data: Mapping[str, Any], loc: Loc, problems: list[Problem]) -> Any:
        """An instance from `data`, or BAD after adding every problem of it."""
        values: dict[str, Any] = {}
        found = len(problems)
        for name, key, check, required, path in self.fields:
            raw = data.get(key, BAD)
            if raw is BAD:
                if required:
                    problems.append(Problem((*loc, key), "missing", "Field required"))
                continue
            values[name] = check(raw, (*loc, key) if loc else path, problems)
        if self.forbid_extra:
            for key in data:
                if key not in self.keys:
                    problems.append(Problem((*loc, key), "extra_forbidden", "Extra inputs are not permitted"))
        if len(problems) > found:
            return BAD
        return self.cls(**values)


def checked(*, keys: Mapping[str, str] | None = None, forbid_extra: bool = False, **checks: Check) -> Any:
    """Give a dataclass deriving from `Model` its checks: one per field that `__init__` takes (`keys`
    names a field as records spell it, when that differs); `forbid_extra` refuses unknown keys."""

    def attach(cls: type[M]) -> type[M]:
        declared = [field for field in fields(cls) if field.init]  # type: ignore[arg-type]
        names = [field.name for field in declared]
        if set(names) != set(checks):
            raise TypeError(f"{cls.__name__}: checks for {sorted(checks)}, fields {sorted(names)}")
        aliases = keys or {}
        cls.__schema__ = Schema(
            cls,
            tuple(
                _Field(
                    field.name,
                    aliases.get(field.name, field.name),
                    checks[field.name],
                    field.default is MISSING and field.default_factory is MISSING,
                    (aliases.get(field.name, field.name),),
                )
                for field in declared
            ),
            forbid_extra=forbid_extra,
        )
        return cls

    return attach


class Model:
    """Base of the record classes (see the module's docstring)."""

    __slots__ = ()
    __schema__: ClassVar[Schema]

    @classmethod
    def model_validate(cls: type[M], data: object) -> M:
        """An instance from `data` (an object, or an instance already); raises `Invalid`."""
        problems: list[Problem] = []
        value = cls.__schema__.check(data, (), problems)
        if value is BAD:
            raise Invalid(problems)
        return value  # type: ignore[no-any-return]

    @classmethod
    def model_validate_json(cls: type[M], raw: str | bytes) -> M:
        """An instance from JSON text; raises `Invalid` (`json_invalid` when the text is not JSON)."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested thousands deep
            raise Invalid([Problem((), "json_invalid", f"Invalid JSON: {str(exc)[:100]}")]) from None
        return cls.model_validate(data)

    def model_dump(
        self, *, mode: str = "python", exclude: Collection[str] = (), exclude_none: bool = False
    ) -> dict[str, Any]:
        """The record as plain values, keyed as records spell them; `mode="json"` gives lists for tuples."""
        json_mode = mode == "json"
        dumped: dict[str, Any] = {}
        for field in self.__schema__.fields:
            if field.name in exclude:
                continue
            value = getattr(self, field.name)
            if value is None and exclude_none:
                continue
            dumped[field.key] = _plain(value, json_mode, exclude_none)
        return dumped

    def model_dump_json(self, *, exclude: Collection[str] = ()) -> str:
        """The record as compact JSON (UTF-8 characters kept as they are)."""
        return encode_json(self.json_fields(exclude))

    def json_fields(self, exclude: Collection[str] = ()) -> dict[str, Any]:
        """The record's fields by key, but for `exclude` (names), as `encode_json` writes them: values as
        they are, records in them included."""
        schema = self.__schema__
        found = _json_object(self)
        for name in exclude:
            found.pop(schema.key_of.get(name, name), None)
        return found

    def model_copy(self: M, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> M:
        """A copy (its values shared, or copied too when `deep`), with the values of `update` set as they
        are (unchecked, as pydantic's `model_copy` does)."""
        duplicate = object.__new__(type(self))
        for name in self.__schema__.slots:
            value = getattr(self, name)
            object.__setattr__(duplicate, name, copy.deepcopy(value) if deep else value)
        for name, value in (update or {}).items():
            object.__setattr__(duplicate, name, value)
        return duplicate


def slot_setters(cls: type[Model], *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """Setters of `cls`'s slots, `names` being every field it has in order (else TypeError, at import):
    for a hot path that builds records already checked, filling them as `__init__` would without its
    keyword arguments and a frozen class's `object.__setattr__` (half the time of building one)."""
    declared = tuple(field.name for field in fields(cls))  # type: ignore[arg-type]
    if declared != names:
        raise TypeError(f"{cls.__name__}: built with {names}, declares {declared}")
    return tuple(getattr(cls, name).__set__ for name in names)


def _json_object(value: object) -> dict[str, Any]:
    if not isinstance(value, Model):
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    schema = value.__schema__
    return dict(zip(schema.dump_keys, schema.values(value), strict=True))


# One encoder for every record (json.dumps with options makes one per call), which turns records into
# objects as it meets them. No check for cycles: a record is a tree of values read from JSON or made here.
_ENCODER: Final = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, check_circular=False, default=_json_object
)


# The same, for text with a lone surrogate in a value no check bounds (`anything`, `json_object`): written
# as a JSON escape, which any UTF-8 store takes.
_ASCII_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=_json_object)


def encode_json(value: object) -> str:
    """`value` as compact JSON (UTF-8 characters kept as they are), records in it as objects."""
    text = _ENCODER.encode(value)
    if not text.isascii() and not _encodes(text):
        return _ASCII_ENCODER.encode(value)
    return text


def as_json(value: Any) -> Any:
    """A checked value as JSON holds it: records as objects, tuples as lists, every container a new one
    (nothing shared with the value it came from)."""
    return _plain(value, True, False)


def _plain(value: Any, json_mode: bool, exclude_none: bool) -> Any:
    if isinstance(value, Model):
        return value.model_dump(mode="json" if json_mode else "python", exclude_none=exclude_none)
    if isinstance(value, list):
        return [_plain(entry, json_mode, exclude_none) for entry in value]
    if isinstance(value, tuple):
        entries = [_plain(entry, json_mode, exclude_none) for entry in value]
        return entries if json_mode else tuple(entries)
    if isinstance(value, dict):
        return {key: _plain(entry, json_mode, exclude_none) for key, entry in value.items()}
    return value
