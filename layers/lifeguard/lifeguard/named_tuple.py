"""`typing.NamedTuple` that leaves its fields' annotations as written.

typing's makes each field's annotation, text under `from __future__ import annotations`, a ForwardRef, and a
ForwardRef calls `compile()`: a process's first call sets up the parser's syntax-tree types, about 3 ms on
the node's Python 3.9, and a cached reboot of the node calls it for nothing else. The node's modules and
`errors` (in the node bundle) define their tuples with this one; mypy reads them as typing's. The class made
is typing's in all else: a `collections.namedtuple` with the fields, defaults and methods written in its
body, and its annotations, as text. The class form only: no call form, no other base (typing's refuses one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["NamedTuple"]

if TYPE_CHECKING:
    from typing import NamedTuple
else:
    import collections

    # What typing's NamedTuple keeps for itself, and refuses in a class body.
    _PROHIBITED = (
        "__new__",
        "__init__",
        "__slots__",
        "__getnewargs__",
        "_fields",
        "_field_defaults",
        "_make",
        "_replace",
        "_asdict",
        "_source",
    )
    _SPECIAL = ("__module__", "__name__", "__annotations__")

    class _NamedTupleMeta(type):
        def __new__(cls, typename, bases, namespace):
            if namespace.get("_root"):
                return super().__new__(cls, typename, bases, namespace)
            if bases != (NamedTuple,):  # typing's refuses any other base too; this one would drop it
                raise TypeError("a NamedTuple can only inherit from NamedTuple")
            annotations = namespace.get("__annotations__", {})
            defaulted = []
            for name in annotations:
                if name in namespace:
                    defaulted.append(name)
                elif defaulted:
                    raise TypeError(
                        f"Non-default namedtuple field {name} cannot follow default field"
                        f"{'s' if len(defaulted) > 1 else ''} {', '.join(defaulted)}"
                    )
            made = collections.namedtuple(
                typename,
                list(annotations),
                defaults=[namespace[name] for name in defaulted],
                module=namespace["__module__"],
            )
            made.__annotations__ = made.__new__.__annotations__ = dict(annotations)
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in made._fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_NamedTupleMeta):
        _root = True

        def __new__(cls, *args, **kwargs):
            raise TypeError("lifeguard.named_tuple.NamedTuple takes the class form only")
