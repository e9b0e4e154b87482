"""Dataclasses made at a cold start's cost: `frozen` (immutable, hashable) and `mutable` (neither).

Each is a standard dataclass (`fields`, `replace`, `asdict` work; `slots` and `kw_only` as `dataclass` takes
them) that compares, hashes and shows itself exactly as `dataclass` makes it do. The difference is when that
costs: `dataclass` writes and compiles each method it adds while the class is made (about 0.15-0.25 ms each,
six for a frozen class), and a function's cold start makes 30-40 of these classes. Here `__eq__`, `__hash__`
and `__repr__` are shared functions that read the class's fields, so only `__init__` (and a frozen class's two
guards against assignment) are compiled. Equality is Python 3.12's (the functions' runtime): the fields
compared as one tuple, so a field holding the same object is equal to itself, NaN included; 3.13's dataclass
compares field by field, and the test, which holds both kinds alike, says so on 3.13.

Classes the node bundle ships stay plain dataclasses: it runs on Python 3.9.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, dataclass_transform, overload

__all__ = ["frozen", "mutable"]


def _values_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of an instance's values of `names`, as `dataclass`'s methods build it."""
    if len(names) == 1:
        name = names[0]
        return lambda instance: (getattr(instance, name),)
    if not names:
        return lambda instance: ()
    return attrgetter(*names)


def _add_methods(cls: type[Any], *, hashable: bool) -> None:
    """`__eq__`, `__repr__` and (`hashable`) `__hash__` as `dataclass(eq=True, repr=True)` adds them, each
    unless the class defines its own; `__hash__` is None for a mutable class, as `dataclass` sets it."""
    declared = dataclasses.fields(cls)
    compared = _values_of([f.name for f in declared if f.compare])
    hashed = _values_of([f.name for f in declared if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in declared if f.repr)
    own = cls.__dict__
    # A `__hash__` of the class's own, as `dataclass` tells one: not the None Python sets beside an `__eq__`.
    own_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and "__eq__" in own))

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({values})"

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    for method in (__eq__, __repr__):
        if method.__name__ not in own:
            method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
            setattr(cls, method.__name__, method)
    if not explicit_hash:
        __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
        cls.__hash__ = __hash__ if hashable else None  # type: ignore[assignment]


@overload
def frozen[T](cls: type[T], /) -> type[T]: ...
@overload
def frozen[T](*, slots: bool = ..., kw_only: bool = ...) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(frozen_default=True)
def frozen[T](cls: type[T] | None = None, /, *, slots: bool = False, kw_only: bool = False) -> Any:
    """`@dataclass(frozen=True)` (and `slots`, `kw_only`): an immutable, hashable dataclass."""

    def make(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(frozen=True, eq=False, repr=False, slots=slots, kw_only=kw_only)(cls)
        _add_methods(made, hashable=True)
        return made

    return make if cls is None else make(cls)


@overload
def mutable[T](cls: type[T], /) -> type[T]: ...
@overload
def mutable[T](*, slots: bool = ..., kw_only: bool = ...) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform()
def mutable[T](cls: type[T] | None = None, /, *, slots: bool = False, kw_only: bool = False) -> Any:
    """`@dataclass` (and `slots`, `kw_only`): a dataclass whose fields may be set, compared by value and
    so not hashable."""

    def make(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(eq=False, repr=False, slots=slots, kw_only=kw_only)(cls)
        _add_methods(made, hashable=False)
        return made

    return make if cls is None else make(cls)
