"""`lifeguard.schema`: each check takes and refuses what pydantic's strict validation of the same type
takes and refuses, with the same location, kind and message (pydantic is the reference here, as a test
dependency only); records report every problem at once and dump and copy as pydantic's models did."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from lifeguard.schema import (
    BAD,
    Check,
    Invalid,
    Model,
    Problem,
    boolean,
    checked,
    converted,
    dict_of,
    encode_json,
    integer,
    json_object,
    list_of,
    literal,
    model,
    number,
    optional,
    string,
)

STRICT = ConfigDict(strict=True)
# Values from outside as JSON gives them, plus what Python callers could pass by mistake.
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)

# (our check, pydantic's type for the same bounds)
PAIRS: dict[str, tuple[Check, Any]] = {
    "integer": (integer(), int),
    "integer bounded": (integer(ge=0, lt=1000), Annotated[int, Field(ge=0, lt=1000)]),
    "integer gt le": (integer(gt=-5, le=5), Annotated[int, Field(gt=-5, le=5)]),
    "boolean": (boolean(), bool),
    "string": (string(), str),
    "string bounded": (
        string(min_length=1, max_length=4),
        Annotated[str, StringConstraints(min_length=1, max_length=4)],
    ),
    "string pattern": (
        string(pattern=r"^[a-c]{1,3}$"),
        Annotated[str, StringConstraints(pattern=r"^[a-c]{1,3}$")],
    ),
    "literal": (
        literal("loop", "intermittent", "replacement"),
        Literal["loop", "intermittent", "replacement"],
    ),
    "literal of two": (literal("a", "b"), Literal["a", "b"]),
    "optional": (optional(integer(ge=1)), Annotated[int, Field(ge=1)] | None),
    "list": (list_of(integer(), max_length=2), Annotated[list[int], Field(max_length=2)]),
    "dict": (dict_of(string(), boolean()), dict[str, bool]),
    "json object": (json_object(), dict[str, Any]),
}


def _ours(check: Check, value: object) -> tuple[bool, list[tuple[Any, str, str]]]:
    problems: list[Problem] = []
    kept = check(value, ("f",), problems)
    return kept is not BAD, [(p.loc, p.type, p.msg) for p in problems]


def _theirs(kind: Any, value: object) -> tuple[bool, list[tuple[Any, str, str]]]:
    try:
        TypeAdapter(kind, config=STRICT).validate_python(value)
    except ValidationError as exc:
        return False, [(("f", *e["loc"]), e["type"], e["msg"]) for e in exc.errors()]
    return True, []


@pytest.mark.parametrize("name", sorted(PAIRS))
@settings(max_examples=150, deadline=None)
@given(value=VALUES)
def test_each_check_takes_and_refuses_what_pydantic_strict_does(name: str, value: object) -> None:
    check, kind = PAIRS[name]
    ours, theirs = _ours(check, value), _theirs(kind, value)
    assert ours[0] == theirs[0], (value, ours, theirs)
    if not ours[0] and name not in {"list", "dict"}:
        # pydantic stops at the first problem of a scalar, as the checks do
        assert ours[1][0] == theirs[1][0], (value, ours, theirs)


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (integer(), True, "Input should be a valid integer"),
        (integer(), "2", "Input should be a valid integer"),
        (integer(ge=1), 0, "Input should be greater than or equal to 1"),
        (integer(lt=10), 10, "Input should be less than 10"),
        (number(), float("inf"), "Input should be a finite number"),
        (number(), "1.5", "Input should be a valid number"),
        (string(max_length=8000), "r" * 8001, "String should have at most 8000 characters"),
        (string(min_length=1), "", "String should have at least 1 character"),
        (string(pattern=r"^ep-[a-z]+$"), "episode one", "String should match pattern '^ep-[a-z]+$'"),
        (string(pattern=r"^i-[a-z]+$"), "i-abc\n", "String should match pattern '^i-[a-z]+$'"),
        (literal("nodeBootstrapped", "nodeReady"), "x", "Input should be 'nodeBootstrapped' or 'nodeReady'"),
        (literal("script_run"), "run", "Input should be 'script_run'"),
        (
            list_of(integer(), max_length=1),
            [1, 2],
            "List should have at most 1 items after validation, not 2",
        ),
        (json_object(), [], "Input should be a valid dictionary"),
    ],
)
def test_a_refused_value_gets_pydantics_words(check: Check, value: object, message: str) -> None:
    problems: list[Problem] = []
    assert check(value, ("f",), problems) is BAD
    assert [p.msg for p in problems] == [message]


def test_a_number_takes_an_int_as_a_float_and_converted_runs_after_the_check() -> None:
    assert number()(3, (), []) == 3.0
    assert isinstance(number()(3, (), []), float)
    cut = converted(string(), lambda text: text[-2:])
    assert cut("abcd", (), []) == "cd"
    assert cut(5, (), problems := []) is BAD
    assert problems


@checked(instance_id=string(pattern=r"^i-[0-9a-f]+$"), at=integer(ge=0))
@dataclass(frozen=True, slots=True, kw_only=True)
class _Failure(Model):
    instance_id: str
    at: int


@checked(
    script_location=string(),
    kind=literal("loop", "intermittent"),
    failures=list_of(model(_Failure), as_tuple=True),
    note=optional(string()),
    keys={"script_location": "scriptLocation"},
)
@dataclass(slots=True, kw_only=True)
class _Episode(Model):
    script_location: str
    kind: str = "loop"
    failures: tuple[_Failure, ...] = ()
    note: str | None = None
    _cache: int | None = field(default=None, init=False, repr=False, compare=False)


@checked(name=string(), forbid_extra=True)
@dataclass(slots=True, kw_only=True)
class _Closed(Model):
    name: str


def test_a_record_reports_every_problem_with_where_it_is() -> None:
    with pytest.raises(Invalid) as raised:
        _Episode.model_validate({"kind": "storm", "failures": [{"instance_id": "x", "at": -1}, 3]})
    assert [(e["loc"], e["type"]) for e in raised.value.errors()] == [
        (("scriptLocation",), "missing"),
        (("kind",), "literal_error"),
        (("failures", 0, "instance_id"), "string_pattern_mismatch"),
        (("failures", 0, "at"), "greater_than_equal"),
        (("failures", 1), "model_type"),
    ]
    assert str(raised.value) == "scriptLocation: Field required (and 4 more)"
    with pytest.raises(Invalid, match="Extra inputs are not permitted"):
        _Closed.model_validate({"name": "a", "other": 1})
    with pytest.raises(Invalid, match="Input should be a valid dictionary or instance of _Closed"):
        _Closed.model_validate([])
    with pytest.raises(Invalid) as not_json:
        _Closed.model_validate_json("{")
    assert not_json.value.errors()[0]["type"] == "json_invalid"


def test_a_record_dumps_by_its_keys_ignores_unknown_ones_and_copies_with_its_private_state() -> None:
    data = {"scriptLocation": "s3://b/k", "failures": [{"instance_id": "i-0a", "at": 5}], "unknown": 1}
    episode = _Episode.model_validate(data)
    assert episode.failures == (_Failure(instance_id="i-0a", at=5),)
    assert episode.model_dump() == {
        "scriptLocation": "s3://b/k",
        "kind": "loop",
        "failures": ({"instance_id": "i-0a", "at": 5},),
        "note": None,
    }
    assert json.loads(episode.model_dump_json(exclude={"note"})) == {
        "scriptLocation": "s3://b/k",
        "kind": "loop",
        "failures": [{"instance_id": "i-0a", "at": 5}],
    }
    assert "note" not in episode.model_dump(exclude_none=True)
    episode._cache = 7
    copied = episode.model_copy(update={"kind": "intermittent"})
    assert (copied.kind, copied._cache, episode.kind) == ("intermittent", 7, "loop")
    deep = episode.model_copy(deep=True)
    assert (deep, deep._cache) == (episode, 7)
    assert deep.failures[0] is not episode.failures[0]
    assert _Episode.model_validate(episode) is episode


def test_checked_refuses_a_class_whose_checks_do_not_match_its_fields() -> None:
    with pytest.raises(TypeError, match="checks for"):

        @checked(name=string())
        @dataclass(slots=True, kw_only=True)
        class _Wrong(Model):
            name: str
            other: int


def test_text_utf8_cannot_hold_is_refused_where_bounded_and_never_raises() -> None:
    problems: list[Problem] = []
    assert string(max_length=10)("a\ud800", ("f",), problems) is BAD
    assert problems[0].type == "string_unicode"
    assert string()("a\ud800", (), []) == "a\ud800"  # unbounded, as pydantic took it
    assert literal("a")("\ud800", (), found := []) is BAD
    assert found[0].type == "string_unicode"

    def cut(text: str) -> str:
        return text.encode()[-2:].decode()

    assert converted(string(), cut)("x\ud800", ("log_tail",), problems := []) is BAD
    assert problems[0].type == "value_error"
    assert problems[0].msg.startswith("Value error, 'utf-8' codec can't encode")
    assert number()(10**400, (), problems := []) is BAD
    assert problems[0].msg == "Input should be a valid number"


def test_json_of_a_value_holding_a_lone_surrogate_is_still_utf8() -> None:
    text = encode_json({"config": {"note": "a\ud800é"}})
    assert text.encode()  # would raise if the surrogate were written as it is
    assert json.loads(text) == {"config": {"note": "a\ud800é"}}
    assert encode_json({"a": "é"}) == '{"a":"é"}'
