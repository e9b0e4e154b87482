"""`lifeguard.named_tuple.NamedTuple` makes the class typing's makes, its annotations left as written and
nothing compiled."""

from __future__ import annotations

import builtins
import inspect
import pickle
import types
import typing
from collections.abc import Iterator
from typing import Any

import pytest

from lifeguard import named_tuple
from lifeguard.named_tuple import NamedTuple


class Run(NamedTuple):
    """A script's run."""

    script: str
    exit_code: int | None = None
    span: tuple[int, int] | None = None

    def __str__(self) -> str:
        return f"{self.script}: {self.exit_code}"

    @classmethod
    def of(cls, text: str) -> Run:
        """The run a line says."""
        script, _, code = text.partition("=")
        return cls(script, int(code))


class TypingRun(typing.NamedTuple):
    """A script's run."""

    script: str
    exit_code: int | None = None
    span: tuple[int, int] | None = None

    def __str__(self) -> str:
        return f"{self.script}: {self.exit_code}"

    @classmethod
    def of(cls, text: str) -> TypingRun:
        """The run a line says."""
        script, _, code = text.partition("=")
        return cls(script, int(code))


@pytest.fixture
def compiled() -> Iterator[list[str]]:
    """The file names `compile()` is called with while the test runs."""
    calls: list[str] = []
    compile_ = builtins.compile

    def recording(source: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(filename))
        return compile_(source, filename, *args, **kwargs)

    builtins.compile = recording
    try:
        yield calls
    finally:
        builtins.compile = compile_


def test_the_class_is_a_named_tuple_as_typings_is() -> None:
    for made in (Run, TypingRun):
        run = made("setup.sh", 3)
        assert run == ("setup.sh", 3, None)
        assert isinstance(run, tuple)
        assert made._fields == ("script", "exit_code", "span")
        assert made._field_defaults == {"exit_code": None, "span": None}
        assert run._replace(exit_code=0) == ("setup.sh", 0, None)
        assert run._asdict() == {"script": "setup.sh", "exit_code": 3, "span": None}
        assert str(run) == "setup.sh: 3"
        assert made.of("a.sh=4") == made("a.sh", 4)
        assert made.__doc__ == "A script's run."
        assert made.__module__ == __name__
        assert not hasattr(run, "__dict__")  # slots, as a namedtuple's
        assert pickle.loads(pickle.dumps(run)) == run
    assert repr(Run("a", 1, (0, 9))) == "Run(script='a', exit_code=1, span=(0, 9))"
    assert repr(TypingRun("a", 1, (0, 9))) == "TypingRun(script='a', exit_code=1, span=(0, 9))"
    assert Run.__qualname__ == "Run"
    assert hash(Run("a")) == hash(("a", None, None))


def test_the_annotations_stay_as_written() -> None:
    assert Run.__annotations__ == {
        "script": "str",
        "exit_code": "int | None",
        "span": "tuple[int, int] | None",
    }
    assert all(isinstance(hint, typing.ForwardRef) for hint in TypingRun.__annotations__.values())


def test_no_text_is_compiled_where_typings_compiles_each_annotation(compiled: list[str]) -> None:
    def make(base: Any) -> Any:
        class Made(base):  # type: ignore[misc, valid-type]
            path: str
            message: str | None = None

        return Made

    assert make(NamedTuple)("p") == ("p", None)
    assert compiled == []
    assert make(typing.NamedTuple)("p") == ("p", None)
    assert compiled == ["<string>", "<string>"]  # one ForwardRef a field


def test_a_field_without_a_default_after_one_with_is_refused_as_typing_refuses_it() -> None:
    refusals = []
    for base in (NamedTuple, typing.NamedTuple):
        with pytest.raises(TypeError) as refused:

            class Bad(base):  # type: ignore[misc, valid-type]
                first: int = 0
                second: int

        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1]


@pytest.mark.parametrize("name", sorted(named_tuple._PROHIBITED))
def test_what_a_named_tuple_keeps_for_itself_cannot_be_overwritten(name: str) -> None:
    for base in (NamedTuple, typing.NamedTuple):
        with pytest.raises(AttributeError, match=f"Cannot overwrite NamedTuple attribute {name}"):
            types.new_class(
                "Bad",
                (base,),
                exec_body=lambda body: body.update(
                    {"__module__": __name__, "__annotations__": {"a": "int"}, name: None}
                ),
            )


def test_another_base_is_refused_not_dropped() -> None:
    class Mixin:
        def hello(self) -> str:
            return "hi"

    with pytest.raises(TypeError, match="can only inherit from NamedTuple"):

        class Mixed(NamedTuple, Mixin):  # type: ignore[misc]
            x: int


def test_the_call_form_is_refused_in_words() -> None:
    with pytest.raises(TypeError, match="takes the class form only"):
        NamedTuple("F", [("a", int)])  # type: ignore[call-arg]


def test_the_signature_shows_the_fields_as_written() -> None:
    assert str(inspect.signature(Run)) == (
        "(script: 'str', exit_code: 'int | None' = None, span: 'tuple[int, int] | None' = None)"
    )
