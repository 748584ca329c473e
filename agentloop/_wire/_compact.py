"""The compact wire form of agent events: bytes linear in the answer, partials rebuilt exactly.

In the full JSON form (`to_json`) every `message_update` carries the whole message so far twice
(`message` and the stream event's `partial`), so an answer of n deltas costs O(n^2) bytes. In
the compact form a `message_update` carries only its stream event, without `partial`, and what
the event does not say:

    {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "Hel"}}
    {"type": "message_update", "assistantMessageEvent": {"type": "toolcall_delta", ...},
     "blocks": {"1": {"type": "toolCall", "id": "c1", "name": "f", "arguments": {"city": "Pa"}}},
     "fields": {"usage": {...}, "responseId": null}}

A reader rebuilds the message so far from the last `message_start` (which, like `message_end`
and every other event, is in the full form): `blocks` replaces (or, at the end, adds) content
blocks by index, `fields` sets top-level keys (null removes one), and a `text_delta` or
`thinking_delta` whose block is not in `blocks` appends its delta to the block's `text` or
`thinking`. When the writer cannot say the change that way (content blocks removed, an update
without a `message_start` before it, a message that is not the event's partial) it writes the
full form, which readers take as is. The rebuilt message equals the in-process one field for
field. Tool-call arguments are sent whole in `blocks` each time they change while streaming (the
partial arguments are whatever the provider's parser made of the JSON so far).

`CompactEncoder` writes the form (one per stream of events: it remembers the message being
streamed); `CompactDecoder` reads it back to the full JSON form or to events. The page of
`examples/sse_chat.html` does the same in a few lines of JavaScript.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any

from .._types._events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PartialEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    appends_only,
    captured,
    own_message,
)
from .._types._messages import AssistantMessage, TextContent, ThinkingContent
from ._decode import from_json
from ._encode import assistant_event_json, block_json, message_json, to_json

__all__ = ("CompactDecoder", "CompactEncoder")

_DELTA_KEYS = {"text_delta": "text", "thinking_delta": "thinking"}


class CompactEncoder:
    """Writes agent events in the compact wire form (see the module docstring).

    Use one encoder per stream of events, fed in order: it remembers the message being streamed
    since its `message_start`.

    Example:
        ```python
        encoder = CompactEncoder()
        async for event in events:
            bus.publish(encode_json(encoder.to_json(event)))
        ```
    """

    __slots__ = ("_last", "_message", "_snapshot")

    def __init__(self) -> None:
        self._last: PartialEvent | None = None  # the stream event of the last update
        self._snapshot: object = None  # what it had captured of its message when it was seen
        self._message: AssistantMessage | None = None  # or the message so far, when no such event

    def to_json(self, event: AgentEvent) -> dict[str, Any]:
        """The compact JSON form of `event` (plain dicts and lists, like `to_json`)."""
        if isinstance(event, MessageUpdate):
            return self._update(event)
        if isinstance(event, MessageStart):
            start = event.message
            self._last = self._snapshot = None
            self._message = start if isinstance(start, AssistantMessage) else None
        elif isinstance(event, MessageEnd):
            self._last = self._snapshot = self._message = None
        return to_json(event)

    def _update(self, update: MessageUpdate) -> dict[str, Any]:
        stream_event = update.assistant_message_event
        if not isinstance(stream_event, PartialEvent):  # a terminal event: not an update, sent whole
            self._last = self._snapshot = self._message = None
            return to_json(update)
        last, snapshot, message = self._last, self._snapshot, self._message
        # What the event captured is kept as it is now: the general path below builds its partial,
        # and the next update's test needs the snapshot.
        self._last, self._snapshot, self._message = stream_event, captured(stream_event), None
        given = own_message(update)
        if update.extra:  # keys of the update itself that agentloop does not model: the full form has them
            return to_json(update)
        if given is None and last is not None and appends_only(stream_event, snapshot):
            return _compact(stream_event)  # the common case: one more chunk of the open block
        before = last.partial if last is not None else message
        after = stream_event.partial
        if before is None or (given is not None and given is not after and given != after):
            return to_json(update)
        return _diff(before, after, stream_event) or to_json(update)


def _diff(before: AssistantMessage, after: AssistantMessage, stream_event: PartialEvent) -> dict[str, Any] | None:
    """The compact update that turns `before` into `after`, or None when there is none."""
    old, new = before.content, after.content
    if len(new) < len(old):
        return None
    out = _compact(stream_event)
    implied = _implied_block(stream_event)
    blocks: dict[str, Any] = {}
    for index, block in enumerate(new):
        if index < len(old):
            previous = old[index]
            if block == previous:
                continue
            if (
                index == implied
                and isinstance(stream_event, (TextDeltaEvent, ThinkingDeltaEvent))
                and _appended(previous, block, stream_event.delta)
            ):
                continue
        blocks[str(index)] = block_json(block)
    if blocks:
        out["blocks"] = blocks
    changed = _fields_changed(before, after)
    if changed:
        out["fields"] = changed
    return out


def _compact(stream_event: PartialEvent) -> dict[str, Any]:
    """`{"type": "message_update", "assistantMessageEvent": <the event without partial>}`."""
    return {"type": "message_update", "assistantMessageEvent": assistant_event_json(stream_event, partial=False)}


def _implied_block(stream_event: PartialEvent) -> int | None:
    """The block a text or thinking delta appends to (readers apply it unless `blocks` has it)."""
    if isinstance(stream_event, (TextDeltaEvent, ThinkingDeltaEvent)):
        return stream_event.content_index
    return None


def _appended(before: object, after: object, delta: str) -> bool:
    """Whether `after` is `before` with `delta` appended to its text (or thinking), nothing else."""
    if isinstance(before, TextContent) and isinstance(after, TextContent):
        return replace(before, text=before.text + delta) == after
    if isinstance(before, ThinkingContent) and isinstance(after, ThinkingContent):
        return replace(before, thinking=before.thinking + delta) == after
    return False


_header = attrgetter(*(f.name for f in fields(AssistantMessage) if f.name != "content"))


def _fields_changed(before: AssistantMessage, after: AssistantMessage) -> dict[str, Any]:
    """The top-level keys of the JSON form that differ (None for a key `after` does not have)."""
    if _header(before) == _header(after):
        return {}  # the usual case: a snapshot shares its header values with the one before
    old = message_json(replace(before, content=()))
    new = message_json(replace(after, content=()))
    changed = {key: value for key, value in new.items() if old.get(key, _ABSENT) != value}
    changed.update((key, None) for key in old if key not in new)
    return changed


_ABSENT = object()


class CompactDecoder:
    """Reads the compact wire form back: the full JSON form (`expand`) or the events (`from_json`).

    Feed it every event of one stream, in order, from the `message_start` of a streaming message
    on. The full form is accepted too (and passed through), so a decoder reads either.

    Example:
        ```python
        decoder = CompactDecoder()
        for line in lines:
            event = decoder.from_json(json.loads(line))
        ```
    """

    __slots__ = ("_message",)

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None  # the JSON of the message so far

    def from_json(self, data: Any) -> AgentEvent:
        """The event of a JSON form, compact or full (ValueError, saying why, if not one)."""
        event = from_json(self.expand(data))
        if not isinstance(event, AgentEvent):
            raise ValueError(f"not an agent event: {data!r:.200}")
        return event

    def expand(self, data: Any) -> dict[str, Any]:
        """The full JSON form (what `to_json` gives) of an event's compact or full JSON form."""
        if not isinstance(data, Mapping):
            raise ValueError(f"an event must be a JSON object, got {type(data).__name__}")
        kind = data.get("type")
        if kind == "message_update" and "message" not in data:
            return self._rebuild(data)
        if kind in ("message_start", "message_update"):
            message = data.get("message")
            self._message = (
                _copy(message) if isinstance(message, Mapping) and message.get("role") == "assistant" else None
            )
        elif kind == "message_end":
            self._message = None
        return dict(data)

    def _rebuild(self, data: Mapping[str, Any]) -> dict[str, Any]:
        message = self._message
        if message is None:
            raise ValueError(
                "a compact message_update needs the message_start of its message first "
                "(after a gap in the events, wait for the next message_start or message_end)"
            )
        stream_event = data.get("assistantMessageEvent")
        if not isinstance(stream_event, Mapping) or not isinstance(stream_event.get("type"), str):
            raise ValueError("a compact message_update needs an 'assistantMessageEvent' object")
        blocks = data.get("blocks") or {}
        changed = data.get("fields") or {}
        if not isinstance(blocks, Mapping) or not isinstance(changed, Mapping):
            raise ValueError("'blocks' and 'fields' of a compact message_update must be objects")
        if "content" in changed:
            raise ValueError("'fields' of a compact message_update cannot set 'content' (its 'blocks' do)")
        content: list[dict[str, Any]] = message["content"]
        for key, value in changed.items():
            if value is None:
                message.pop(key, None)
            else:
                message[key] = value
        for key, block in blocks.items():
            index = int(key) if isinstance(key, str) and key.isdigit() else -1
            if not 0 <= index <= len(content) or not isinstance(block, Mapping):
                raise ValueError(f"'blocks' of a compact message_update holds a bad block index {key!r}")
            if index == len(content):
                content.append(dict(block))
            else:
                content[index] = dict(block)
        kind = stream_event["type"]
        key = _DELTA_KEYS.get(kind)
        at = stream_event.get("contentIndex")
        if key is not None and str(at) not in blocks:
            delta = stream_event.get("delta")
            if not isinstance(delta, str):
                raise ValueError(f"a compact {kind} needs a string 'delta', got {type(delta).__name__}")
            if not isinstance(at, int) or not 0 <= at < len(content) or not isinstance(content[at].get(key), str):
                raise ValueError(f"a compact {kind} for content block {at!r}, which has no {key}")
            content[at][key] += delta
        return {
            "type": "message_update",
            "message": _copy(message),
            "assistantMessageEvent": {**stream_event, "partial": _copy(message)},
        }


def _copy(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a message's JSON whose content list and blocks may be changed on their own."""
    content = message.get("content", ())
    if not isinstance(content, (list, tuple)) or not all(isinstance(block, Mapping) for block in content):
        raise ValueError("the 'content' of an assistant message must be an array of objects")
    out = dict(message)
    out["content"] = [dict(block) for block in content]
    return out
