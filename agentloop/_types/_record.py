"""`fast_init`: the `__init__` of the frozen slotted dataclasses made at run time.

agentloop's messages, content blocks and events are `@dataclass(frozen=True, slots=True)`: their
fields, `==`, hash, repr, `__match_args__`, pickling, `dataclasses.fields` and `replace` are the
dataclass's own. `@fast_init` (written above the `@dataclass`) changes one thing, the
`__init__`, which keeps the dataclass's signature, defaults and `__post_init__` call:

- A frozen dataclass stores each field with `object.__setattr__`, which looks the name up again
  and goes the generic way to the slot; this one stores through each slot's own descriptor, in
  about half the time.
- A field declared with `checked_field(check, fast=T)` has its value checked (or converted) by
  `check(record, value)` inside `__init__`, except when the value is the field's default or its
  type is exactly `T`: the usual value costs no call, where a `__post_init__` costs one for
  every record.

Events are made per streamed delta and a tool turn makes about twenty records: a frozen
dataclass's `__init__` and a `__post_init__` per record made those runs 10-15% slower
(benchmarks/README.md, "Records").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ("checked_field", "fast_init")

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


def checked_field(check: Callable[[Any, Any], Any], *, fast: type | None = None, **options: Any) -> Any:
    """A dataclass field (`options` as for `dataclasses.field`) whose value `__init__` passes
    through `check(record, value)` (which returns the value to store, or raises), unless it is the
    default or its type is exactly `fast`. Only `@fast_init` runs the check."""
    return dataclasses.field(metadata={"check": check, "fast": fast}, **options)


def _fast_init(cls: type) -> Callable[..., None] | None:
    """An `__init__` with the dataclass's own signature that checks and stores through the slots."""
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        name = f.name
        namespace[f"_set{i}"] = _slot(cls, name).__set__
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_default:
            namespace[f"_default{i}"] = f.default
        if has_factory:
            namespace[f"_factory{i}"] = f.default_factory
        if not f.init:
            body.append(f"    _set{i}(self, {f'_default{i}' if has_default else f'_factory{i}()'})")
            continue
        (keyword if f.kw_only else positional).append(
            name + ("=_default" + str(i) if has_default else "=_FACTORY" if has_factory else "")
        )
        check = f.metadata.get("check")
        if has_factory:
            body.append(f"    if {name} is _FACTORY:\n        {name} = _factory{i}()")
        if check is not None:
            namespace[f"_check{i}"] = check
            tests = [f"{name} is not _default{i}"] if has_default else []
            if f.metadata.get("fast") is not None:
                namespace[f"_fast{i}"] = f.metadata["fast"]
                tests.append(f"type({name}) is not _fast{i}")
            keyword_if = "elif" if has_factory else "if"
            body.append(f"    {keyword_if} {' and '.join(tests) or 'True'}:\n        {name} = _check{i}(self, {name})")
        body.append(f"    _set{i}(self, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    if not body:
        return None  # nothing to store: `object.__init__` (which takes no arguments) is the fastest
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)  # as dataclasses makes its methods; the source uses no outside text
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def fast_init(cls: type[_T]) -> type[_T]:
    """Give the frozen slotted dataclass `cls` an `__init__` that stores through its slots."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"@fast_init goes above @dataclass(frozen=True, slots=True), not on {cls.__name__}")
    init = _fast_init(cls)
    if init is None:
        del cls.__init__  # (the dataclass's, which does nothing)
    else:
        cls.__init__ = init  # type: ignore[method-assign]  # replacing the generated method is this decorator's job
    return cls
