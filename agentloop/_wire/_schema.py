"""The wire format as a JSON Schema, generated from the event and message types.

    python -m agentloop._wire._schema            # (re)write agentloop/event-schema.json
    python -m agentloop._wire._schema --check    # exit 1 when the file is not what the types give
    python -m agentloop._wire._schema -          # print it

The schema's root is an `EventEnvelope` (what goes on a bus or an SSE stream); `$defs` holds every
event, assistant stream event, message, content block and tool result, under its Python class name.
Fields come from the classes' dataclass fields (a field stored as `_name` is written as its
property `name`), keys are their camelCase names as the codec writes them, and a field typed
`X | None` is optional (the codec leaves None out). The few fields the codec leaves out otherwise are
listed in `_OPTIONAL`, the keys agentloop writes from `extra` in `_FROM_EXTRA`; custom messages
(any other role, their own keys) are described by hand. A test validates the codec's output for
real runs against this schema, with `additionalProperties: false`, so the two cannot drift apart
silently. The schema is that of the values agentloop makes: a value read from another generation
(pi-agent-core 1.x) carries the keys agentloop does not model in its `extra`, and the codec writes
them back beside these.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

from .._types import _events, _messages
from .._types._messages import LLM_ROLES
from ._envelope import EventEnvelope

__all__ = (
    "DRAFT",
    "SCHEMA_PATH",
    "event_schema",
    "main",
    "render",
)

SCHEMA_PATH = Path(__file__).parent.parent / "event-schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

_ALIASES: dict[str, Any] = {
    "AgentEvent": _events.AgentEvent,
    "AssistantMessageEvent": _events.AssistantMessageEvent,
    "AgentMessage": _messages.AgentMessage,
    "UserContent": _messages.UserContent,
    "AssistantContent": _messages.AssistantContent,
}
_CLASSES: tuple[type, ...] = (
    _messages.Cost,
    _messages.Usage,
    _messages.TextContent,
    _messages.ThinkingContent,
    _messages.ImageContent,
    _messages.ToolCall,
    _messages.UserMessage,
    _messages.AssistantMessage,
    _messages.ToolResultMessage,
    _messages.AgentToolResult,
    *get_args(_events.AssistantMessageEvent),
    *get_args(_events.AgentEvent),
    EventEnvelope,
)
_OPTIONAL = {
    (_messages.ThinkingContent, "redacted"),  # written only when true
    (_messages.ToolResultMessage, "details"),  # Any: written unless None
    (_messages.AgentToolResult, "details"),
}

_FROM_EXTRA: dict[type, dict[str, Any]] = {
    _messages.AssistantMessage: {
        "responseModel": {"type": "string", "description": "The model that answered, when not the one asked for."}
    },
}
"""Keys agentloop itself writes from a record's `extra` (optional): the providers' `responseModel`."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def _alias_of(args: tuple[Any, ...]) -> str | None:
    for name, alias in _ALIASES.items():
        if set(get_args(alias)) == set(args):
            return name
    return None


def _type_schema(tp: Any) -> dict[str, Any]:
    if tp is Any:
        return {}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if tp in simple:
        return {"type": simple[tp]}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is ClassVar:
        return _type_schema(args[0])
    if origin is Literal:
        return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
    if origin in (Union, types.UnionType):
        alias = _alias_of(args)
        if alias is not None:
            return _ref(alias)
        return {"anyOf": [_type_schema(arg) for arg in args]}
    if origin in (tuple, list, Sequence):
        return {"type": "array", "items": _type_schema(args[0])}
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return {"type": "object"}
    if isinstance(tp, type) and (tp in _CLASSES or tp is _messages.CustomMessage):
        return _ref(tp.__name__)
    raise TypeError(f"no JSON schema for the type {tp!r}")


def _fields(cls: Any) -> list[tuple[str, Any]]:
    """The fields of a record and their types, as its JSON form has them: a field stored as
    `_name` (a stream event's `_partial`, an update's `_message`) is written as its property `name`."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":  # not a key: the keys it holds sit beside the record's own
            continue
        if f.name.startswith("_"):
            name = f.name[1:]
            out.append((name, typing.get_type_hints(getattr(cls, name).fget)["return"]))
        else:
            out.append((f.name, hints[f.name]))
    if "type" in hints and get_origin(hints["type"]) is ClassVar:
        out.append(("type", get_args(hints["type"])[0]))
    return out


def _object_schema(cls: type) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, tp in _fields(cls):
        args = get_args(tp)
        optional = (cls, name) in _OPTIONAL
        if get_origin(tp) in (Union, types.UnionType) and type(None) in args:
            rest = tuple(a for a in args if a is not type(None))
            tp = rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007 - rebuilt from parts
            optional = True
        key = _camel(name)
        properties[key] = _type_schema(tp)
        if not optional:
            required.append(key)
    properties.update(_FROM_EXTRA.get(cls, {}))
    doc = (cls.__doc__ or "").strip().split("\n")[0]
    schema: dict[str, Any] = {"type": "object", "description": doc, "properties": properties}
    schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _custom_message() -> dict[str, Any]:
    return {
        "type": "object",
        "description": (_messages.CustomMessage.__doc__ or "").strip().split("\n")[0]
        + " Its own fields sit beside `role` and `timestamp`.",
        "properties": {
            "role": {"type": "string", "minLength": 1, "not": {"enum": list(LLM_ROLES)}},
            "timestamp": {"type": "integer"},
        },
        "required": ["role", "timestamp"],
    }


def event_schema() -> dict[str, Any]:
    """The JSON Schema of the wire format (root: an event envelope)."""
    defs: dict[str, Any] = {}
    for cls in _CLASSES:
        defs[cls.__name__] = _object_schema(cls)
    defs["CustomMessage"] = _custom_message()
    for name, alias in _ALIASES.items():
        members = [_type_schema(arg) for arg in get_args(alias)]
        defs[name] = {"oneOf": members}
    return {
        "$schema": DRAFT,
        "title": "agentloop event envelope",
        "description": (
            "One agent event in its envelope, as agentloop's codec writes it (camelCase keys, the "
            "TypeScript pi-agent-core names). Generated from the Python types by "
            "`python -m agentloop._wire._schema`; every definition is in $defs under its class name."
        ),
        "$ref": "#/$defs/EventEnvelope",
        "$defs": defs,
    }


def render() -> str:
    """The schema file's text."""
    return json.dumps(event_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: write, check (`--check`) or print (`-`) the schema file."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    if len(paths) > 1 or any(a.startswith("--") for a in paths):
        print("usage: python -m agentloop._wire._schema [--check] [PATH | -]", file=sys.stderr)
        return 2
    text = render()
    if paths == ["-"]:
        sys.stdout.write(text)
        return 0
    path = Path(paths[0]) if paths else SCHEMA_PATH
    if check:
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(f"{path} is out of date: run `python -m agentloop._wire._schema`", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
