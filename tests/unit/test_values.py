"""`lifeguard.values`: its dataclasses compare, hash, show and guard themselves as `dataclass` makes them
do, each class made both ways from the same body."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from lifeguard.values import frozen, mutable

Maker = Callable[[type[Any]], type[Any]]

# (name, how `lifeguard.values` makes it, how `dataclass` makes it)
FROZEN_WAYS: list[tuple[str, Maker, Maker]] = [
    ("frozen", frozen, dataclass(frozen=True)),
    (
        "frozen, slots, kw_only",
        frozen(slots=True, kw_only=True),
        dataclass(frozen=True, slots=True, kw_only=True),
    ),
]
MUTABLE_WAYS: list[tuple[str, Maker, Maker]] = [
    ("mutable", mutable, dataclass),
    ("mutable, slots, kw_only", mutable(slots=True, kw_only=True), dataclass(slots=True, kw_only=True)),
]

ALL_WAYS = FROZEN_WAYS + MUTABLE_WAYS


def _names(ways: list[tuple[str, Maker, Maker]]) -> list[str]:
    return [name for name, _, _ in ways]


def _point(make: Maker) -> type[Any]:
    class Point:
        x: int
        y: list[int] = field(default_factory=list)
        note: str = field(default="", compare=False)
        secret: str = field(default="", repr=False)
        tag: str = field(default="", hash=False)

        def total(self) -> int:
            return self.x + sum(self.y)

    return make(Point)


def _empty(make: Maker) -> type[Any]:
    class Empty:
        pass

    return make(Empty)


def _one(make: Maker) -> type[Any]:
    class One:
        value: float

    return make(One)


def _both(ours: type[Any], theirs: type[Any], **values: Any) -> tuple[Any, Any]:
    return ours(**values), theirs(**values)


@pytest.mark.parametrize(("way", "ours", "theirs"), ALL_WAYS, ids=_names(ALL_WAYS))
def test_equality_and_repr_are_the_dataclass_ones(way: str, ours: Maker, theirs: Maker) -> None:
    ours_cls, theirs_cls = _point(ours), _point(theirs)
    cases = [
        ({"x": 1, "y": [2]}, {"x": 1, "y": [2]}),
        ({"x": 1, "y": [2]}, {"x": 1, "y": [3]}),
        ({"x": 1, "note": "a"}, {"x": 1, "note": "b"}),  # compare=False
        ({"x": 1, "secret": "a"}, {"x": 1, "secret": "b"}),
        ({"x": 1, "tag": "a"}, {"x": 2, "tag": "a"}),
    ]
    for left, right in cases:
        a, a_theirs = _both(ours_cls, theirs_cls, **left)
        b, b_theirs = _both(ours_cls, theirs_cls, **right)
        assert (a == b) is (a_theirs == b_theirs), (way, left, right)
        assert (a != b) is (a_theirs != b_theirs), (way, left, right)
        shown, shown_theirs = repr(a), repr(a_theirs)
        assert shown.replace(ours_cls.__qualname__, "P") == shown_theirs.replace(theirs_cls.__qualname__, "P")
    mine = ours_cls(x=1)
    assert "secret" not in repr(mine)
    assert repr(mine).startswith(f"{ours_cls.__qualname__}(x=1, y=[], note=''")
    assert mine.__eq__(theirs_cls(x=1)) is NotImplemented  # another class: never equal, as dataclass says
    assert mine != theirs_cls(x=1)
    assert mine.total() == 1
    assert [f.name for f in dataclasses.fields(mine)] == ["x", "y", "note", "secret", "tag"]
    assert dataclasses.replace(mine, x=5).x == 5
    assert _empty(ours)() != _empty(ours)()  # two classes made apart are two classes
    empty = _empty(ours)
    assert empty() == empty()
    assert repr(empty()) == f"{empty.__qualname__}()"
    one = _one(ours)
    nan = float("nan")
    assert one(value=nan) == one(value=nan)  # the same object: equal, as the tuple dataclass compares says
    one_theirs = _one(theirs)
    assert one_theirs(value=nan) == one_theirs(value=nan)


@pytest.mark.parametrize(("way", "ours", "theirs"), FROZEN_WAYS, ids=_names(FROZEN_WAYS))
def test_a_frozen_one_hashes_as_dataclass_and_refuses_assignment(
    way: str, ours: Maker, theirs: Maker
) -> None:
    def make(maker: Maker) -> type[Any]:
        class Key:
            cluster: str
            group: str
            seen: int = field(default=0, compare=False)
            label: str = field(default="", hash=False)

        return maker(Key)

    ours_cls, theirs_cls = make(ours), make(theirs)
    for values in ({"cluster": "a", "group": "b"}, {"cluster": "a", "group": "b", "seen": 3, "label": "x"}):
        mine, reference = _both(ours_cls, theirs_cls, **values)
        assert hash(mine) == hash(reference), way
    assert len({ours_cls(cluster="a", group="b"), ours_cls(cluster="a", group="b", seen=9)}) == 1
    instance = ours_cls(cluster="a", group="b")
    with pytest.raises(FrozenInstanceError):
        instance.cluster = "c"
    with pytest.raises(FrozenInstanceError):
        del instance.group


@pytest.mark.parametrize(("way", "ours", "theirs"), MUTABLE_WAYS, ids=_names(MUTABLE_WAYS))
def test_a_mutable_one_is_not_hashable_and_takes_assignment(way: str, ours: Maker, theirs: Maker) -> None:
    ours_cls, theirs_cls = _point(ours), _point(theirs)
    assert ours_cls.__hash__ is None, way
    assert theirs_cls.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(ours_cls(x=1))
    instance = ours_cls(x=1)
    instance.x = 4
    assert instance == ours_cls(x=4)


def test_methods_a_class_writes_itself_are_kept() -> None:
    @frozen
    class Named:
        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and self.name.lower() == other.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert Named("A") == Named("a")
    assert hash(Named("A")) == hash(Named("a"))
    assert repr(Named("A")) == "<A>"

    @frozen
    class EqualOnly:  # noqa: PLW1641 (an `__eq__` and no `__hash__`: hashed by its fields, as dataclass does)
        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, EqualOnly) and self.name == other.name

    assert hash(EqualOnly("a")) == hash(("a",))


def test_a_subclass_compares_its_own_fields_and_not_its_parents() -> None:
    @mutable
    class Counts:
        skipped: int = 0

    @mutable
    class More(Counts):
        groups: int = 0

    assert More(1, 2) == More(1, 2)
    assert More(1, 2) != More(1, 3)
    assert More(1, 2) != Counts(1)
    assert repr(More(1, 2)).endswith("More(skipped=1, groups=2)")


def test_a_value_holding_itself_is_shown_without_recursing() -> None:
    @mutable
    class Node:
        children: list[Any] = field(default_factory=list)

    node = Node()
    node.children.append(node)
    assert repr(node).endswith("Node(children=[...])")
