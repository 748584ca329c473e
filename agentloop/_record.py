"""`fast_init`: the `__init__` of the frozen slotted dataclasses made at run time.

agentloop's messages, content blocks and events are `@dataclass(frozen=True, slots=True)`: their
fields, `==`, hash, repr, `__match_args__`, pickling, `dataclasses.fields` and `replace` are the
dataclass's own. `@fast_init` (written above the `@dataclass`) changes one thing: a frozen
dataclass's `__init__` stores each field with `object.__setattr__`, which looks the name up again
and goes the generic way to the slot, while this one, with the same signature, defaults and
`__post_init__` call, stores through each slot's own descriptor, in about half the time. Events
are made per streamed delta: the difference was more than 10% of a streaming run
(benchmarks/README.md, "Records").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ("fast_init",)

_T = TypeVar("_T")


class _Factory:
    """The default shown in a signature for a field made by a `default_factory`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Factory()


def _slot(cls: type, name: str) -> Any:
    """The slot descriptor of field `name` (the class that declares it may be a base)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__name__} has no slot {name!r}")  # pragma: no cover (dataclass made one)


def _fast_init(cls: type) -> Callable[..., None]:
    """An `__init__` with the dataclass's own signature that stores through the slots."""
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        namespace[f"_set{i}"] = _slot(cls, f.name).__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default{i}"] = f.default
            default, value = f"=_default{i}", f.name if f.init else f"_default{i}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{i}"] = f.default_factory
            default = "=_FACTORY"
            value = f"_factory{i}() if {f.name} is _FACTORY else {f.name}" if f.init else f"_factory{i}()"
        else:
            default, value = "", f.name
        if f.init:
            (keyword if f.kw_only else positional).append(f"{f.name}{default}")
        body.append(f"    _set{i}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, namespace)  # the same technique as dataclasses' own generated methods
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def fast_init(cls: type[_T]) -> type[_T]:
    """Give the frozen slotted dataclass `cls` an `__init__` that stores through its slots."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"@fast_init goes above @dataclass(frozen=True, slots=True), not on {cls.__name__}")
    cls.__init__ = _fast_init(cls)  # type: ignore[method-assign]  # replacing the generated method is this decorator's job
    return cls
