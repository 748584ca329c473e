"""The wire that the Gemini API (`google-generative-ai`) and Vertex AI (`google-vertex`) share: the
`streamGenerateContent` body (contents, tools, generation and thinking config) and the parser of
its server-sent events (each a whole `GenerateContentResponse` chunk).

Thought signatures: Gemini attaches an opaque `thoughtSignature` to a part (a thought, a text,
a function call) and requires it back, on the same part, when the conversation is replayed (Gemini
3 rejects a function call without one). A signature is kept on the block it came with (thinking
`thinking_signature`, text `text_signature`, tool call `thought_signature`) and sent back only to
the same provider and model, only when it is valid base64.

Thinking: models whose id names Gemini 3 Pro/Flash, Gemini 4 and later, `gemini-flash-latest`,
`gemini-flash-lite-latest` or Gemma 4 take a `thinkingLevel`; the others a `thinkingBudget` in
tokens (`options.thinking_budgets`, else per-model defaults, else -1: dynamic). The compat flag
`thinking_level_map` ({level: Google level or None}) says which levels a model supports, as
pi-ai's `thinkingLevelMap`; a level it lacks is clamped to the nearest one it has.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from .._types._builder import AssistantMessageBuilder
from .._types._events import AssistantMessageEvent
from .._types._messages import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    now_ms,
)
from .._types._stream_fn import StreamOptions
from ._errors import ProviderError
from ._parse import SSEParser, as_int, as_str, stream_object
from ._request import check_llm_messages, compat, json_text, native_output, sanitize, tool_specs
from ._thinking import clamp_thinking_level
from ._transform import transform_messages
from ._usage import make_usage

__all__ = (
    "GoogleParser",
    "build_body",
    "convert_messages",
    "convert_tools",
    "google_budget",
    "map_stop_reason",
    "model_path",
    "thinking_config",
    "uses_thinking_level",
)

_BUDGETS = {
    "2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "2.5-flash-lite": {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576},
    "2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}
_GEMINI_VERSION = re.compile(r"gemini(?:-live)?-(\d+)")
_LEVEL_MODEL = re.compile(r"gemini-3(?:\.\d+)?-(?:pro|flash)")
_GEMMA_4 = re.compile(r"gemma-?4")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")
_USER_IMAGE_OMITTED = "(image omitted: model does not support images)"
_TOOL_IMAGE_OMITTED = "(tool image omitted: model does not support images)"


# --- thinking ------------------------------------------------------------------------------


def _gemini_version(model_id: str) -> int | None:
    match = _GEMINI_VERSION.search(model_id.lower())
    return int(match.group(1)) if match else None


def uses_thinking_level(model: Model) -> bool:
    """Whether the model takes a `thinkingLevel` (else a `thinkingBudget`)."""
    model_id = model.id.lower()
    return bool(
        _LEVEL_MODEL.search(model_id)
        or (_gemini_version(model_id) or 0) >= 4
        or model_id in ("gemini-flash-latest", "gemini-flash-lite-latest")
        or _GEMMA_4.search(model_id)
    )


def _level_map(model: Model) -> Mapping[str, Any]:
    levels = compat(model, "thinking_level_map", None)
    return levels if isinstance(levels, Mapping) else {}


def _google_level(model: Model, level: str) -> str:
    mapped = _level_map(model).get(level)
    resolved = mapped.lower() if isinstance(mapped, str) else level
    if resolved not in ("minimal", "low", "medium", "high", "xhigh"):
        raise ProviderError(
            f"Unsupported Google thinking level mapping for {model.provider}/{model.id}: {level} -> {mapped}"
        )
    return resolved


def google_budget(model: Model, level: str, budgets: Mapping[str, int] | None) -> int:
    """The `thinkingBudget` of a level: `budgets` (the call's), then the model's defaults, else -1
    (the model decides). `xhigh` takes the `high` budget."""
    if level == "xhigh":
        level = "high"
    if budgets and level in budgets:
        return int(budgets[level])
    for family, defaults in _BUDGETS.items():
        if family in model.id:
            return defaults[level]
    return -1


def thinking_config(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    """The `thinkingConfig` for the call's thinking level (None: the model does not reason)."""
    if not model.reasoning:
        return None
    requested = options.reasoning
    level = clamp_thinking_level(model, requested) if requested is not None and requested != "off" else "off"
    if level == "off":  # the least the model allows: no budget, or its lowest level
        if not uses_thinking_level(model):
            return {"thinkingBudget": 0}
        fallback = clamp_thinking_level(model, "off")
        if fallback == "off":
            return {"thinkingBudget": 0}
        return {"thinkingLevel": _google_level(model, fallback).upper()}
    resolved = _google_level(model, level)
    if uses_thinking_level(model):
        return {"includeThoughts": True, "thinkingLevel": resolved.upper()}
    return {"includeThoughts": True, "thinkingBudget": google_budget(model, resolved, options.thinking_budgets)}


# --- the body ------------------------------------------------------------------------------


def model_path(model: Model, *, vertex: bool) -> str:
    """The model's resource path (`models/{id}` on the Gemini API, `publishers/google/models/{id}`
    on Vertex AI); an id that already is a path is kept."""
    model_id = model.id
    if not model_id or ".." in model_id or "?" in model_id or "&" in model_id:
        raise ProviderError(f"Invalid Google model id {model_id!r}")
    if vertex:
        if model_id.startswith(("publishers/", "projects/", "models/")):
            return model_id
        if "/" in model_id:
            publisher, name = model_id.split("/", 2)[:2]
            return f"publishers/{publisher}/models/{name}"
        return f"publishers/google/models/{model_id}"
    if model_id.startswith(("models/", "tunedModels/")):
        return model_id
    return f"models/{model_id}"


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body of a `streamGenerateContent` request."""
    check_llm_messages(context)
    body: dict[str, Any] = {"contents": convert_messages(model, context)}
    if context.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": sanitize(context.system_prompt)}], "role": "user"}
    if context.tools:
        body["tools"] = convert_tools(context.tools)
    generation: dict[str, Any] = {}
    if options.temperature is not None:
        generation["temperature"] = options.temperature
    max_tokens = options.max_tokens or model.max_tokens
    if max_tokens:
        generation["maxOutputTokens"] = max_tokens
    thinking = thinking_config(model, options)
    if thinking is not None:
        generation["thinkingConfig"] = thinking
    generation.update(native_output(model, options, "gemini") or {})
    if generation:
        body["generationConfig"] = generation
    extra = compat(model, "extra_body", None)
    if extra:
        body.update(extra)
    return body


def convert_tools(tools: Any) -> list[dict[str, Any]]:
    """Tools as one `functionDeclarations` entry, each schema as `parametersJsonSchema` (full JSON
    Schema) with string and number `const`s as one-value `enum`s (Gemini ignores `const`)."""
    declarations = [
        {"name": name, "description": description, "parametersJsonSchema": _const_as_enum(parameters)}
        for name, description, parameters in tool_specs(tools)
    ]
    return [{"functionDeclarations": declarations}]


_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_SUBSCHEMAS = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)


def _const_as_enum(schema: Any, name_map: bool = False) -> Any:
    if isinstance(schema, (list, tuple)):
        return [_const_as_enum(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if name_map or key in _SUBSCHEMAS:
            result[key] = _const_as_enum(value)
        elif key in _NAME_MAPS:
            result[key] = _const_as_enum(value, True)
        else:
            result[key] = value
    if not name_map and "const" in result and "enum" not in result:
        value = result["const"]
        if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            del result["const"]
            result["enum"] = [value]
    return result


def _requires_call_id(model_id: str) -> bool:
    """Models that need the call id in function calls and responses."""
    version = _gemini_version(model_id)
    return model_id.startswith(("claude-", "gpt-oss-")) or (version is not None and version >= 3)


def _multimodal_results(model_id: str) -> bool:
    """Gemini 3 and later take a tool result's images inside the function response."""
    version = _gemini_version(model_id)
    return version is None or version >= 3


def _valid_signature(signature: str | None) -> bool:
    if not signature or len(signature) % 4 or not _BASE64.fullmatch(signature):
        return False
    try:
        base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _image(block: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.mime_type, "data": block.data}}


def _without_images(content: Iterable[UserContent], placeholder: str) -> list[UserContent]:
    """Images replaced by one placeholder text per run of images (a model without image input)."""
    out: list[UserContent] = []
    previous = False
    for block in content:
        if isinstance(block, ImageContent):
            if not previous:
                out.append(TextContent(placeholder))
            previous = True
            continue
        out.append(block)
        previous = block.text == placeholder
    return out


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The transcript as Gemini `contents` (consecutive tool results share one user turn)."""
    images_ok = "image" in model.input
    with_ids = _requires_call_id(model.id)

    def normalize(tool_id: str) -> str:
        return _UNSAFE_ID.sub("_", tool_id)[:64]

    contents: list[dict[str, Any]] = []
    for message in transform_messages(context.messages, model, normalize if with_ids else None):
        if isinstance(message, ToolResultMessage):
            _tool_result(message, model, images_ok, with_ids, contents)
        elif isinstance(message, AssistantMessage):
            parts = _assistant_parts(message, model, with_ids)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(message.content, str):
            contents.append({"role": "user", "parts": [{"text": sanitize(message.content)}]})
        else:
            blocks = message.content if images_ok else _without_images(message.content, _USER_IMAGE_OMITTED)
            parts = [
                {"text": sanitize(block.text)} if isinstance(block, TextContent) else _image(block) for block in blocks
            ]
            if parts:
                contents.append({"role": "user", "parts": parts})
    return contents


def _assistant_parts(message: AssistantMessage, model: Model, with_ids: bool) -> list[dict[str, Any]]:
    same = message.provider == model.provider and message.model == model.id

    def signature(value: str | None) -> dict[str, str]:
        return {"thoughtSignature": value} if same and value is not None and _valid_signature(value) else {}

    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            signed = signature(block.text_signature)
            # An empty text that carries a signature is sent: Gemini needs the signature back.
            if block.text.strip() or signed:
                parts.append({"text": sanitize(block.text), **signed})
        elif isinstance(block, ThinkingContent):
            if same:
                signed = signature(block.thinking_signature)
                if block.thinking.strip() or signed:
                    parts.append({"thought": True, "text": sanitize(block.thinking), **signed})
            elif block.thinking.strip():
                parts.append({"text": sanitize(block.thinking)})
        else:
            call: dict[str, Any] = {"name": block.name, "args": dict(block.arguments)}
            if with_ids:
                call["id"] = block.id
            parts.append({"functionCall": call, **signature(block.thought_signature)})
    return parts


def _tool_result(
    message: ToolResultMessage, model: Model, images_ok: bool, with_ids: bool, contents: list[dict[str, Any]]
) -> None:
    blocks = message.content if images_ok else _without_images(message.content, _TOOL_IMAGE_OMITTED)
    text = "\n".join(b.text for b in blocks if isinstance(b, TextContent))
    images = [_image(b) for b in blocks if isinstance(b, ImageContent)]
    value = sanitize(text) if text.strip() else "(see attached image)" if images else ""
    nested = _multimodal_results(model.id)
    response: dict[str, Any] = {
        "name": message.tool_name,
        "response": {"error": value} if message.is_error else {"output": value},
    }
    if images and nested:
        response["parts"] = images
    if with_ids:
        response["id"] = message.tool_call_id
    part = {"functionResponse": response}
    last = contents[-1] if contents else None
    if last is not None and last["role"] == "user" and any("functionResponse" in p for p in last["parts"]):
        last["parts"].append(part)
    else:
        contents.append({"role": "user", "parts": [part]})
    if images and not nested:  # older models take a tool's images in a user turn of their own
        contents.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})


# --- the stream -----------------------------------------------------------------------------

_ERROR_REASONS = frozenset(
    {
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "SAFETY",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        "RECITATION",
        "FINISH_REASON_UNSPECIFIED",
        "OTHER",
        "LANGUAGE",
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "NO_IMAGE",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
        "ESCALATION",
        "PUP_LIMITED_DISABLED",
        "MODEL_ARMOR",
    }
)
_RETRYABLE_CODES = frozenset({408, 409, 429, 500, 502, 503, 504})
_call_numbers = itertools.count(1)


def map_stop_reason(reason: str) -> Literal["stop", "length", "error"]:
    """A Gemini `finishReason` as a stop reason: `STOP` (and a reason this version does not know)
    is `stop`, `MAX_TOKENS` and `CONTINUATION` are `length`, safety, recitation, malformed calls
    and the other failures are `error`."""
    if reason in ("MAX_TOKENS", "CONTINUATION"):
        return "length"
    if reason in _ERROR_REASONS:
        return "error"
    return "stop"


def _prompt_block_error(label: str, feedback: Mapping[str, Any]) -> str:
    """The error text of a prompt Gemini blocked (no candidates, `promptFeedback.blockReason`)."""
    reason = feedback.get("blockReason")
    details = [f"{label} prompt blocked: {reason if isinstance(reason, str) else 'unknown reason'}"]
    message = feedback.get("blockReasonMessage")
    if isinstance(message, str) and message:
        details.append(message)
    ratings = []
    for rating in feedback.get("safetyRatings") or ():
        if isinstance(rating, Mapping) and isinstance(rating.get("category"), str) and rating["category"]:
            probability = rating.get("probability")
            suffix = f" ({probability})" if isinstance(probability, str) and probability else ""
            ratings.append(rating["category"] + suffix)
    if ratings:
        details.append(f"Safety rating{'' if len(ratings) == 1 else 's'}: {', '.join(ratings)}")
    return ". ".join(details)


class _Open:
    """The text or thinking block that parts are appended to."""

    __slots__ = ("index", "kind", "signature")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.signature: str | None = None


class GoogleParser(SSEParser):
    """`streamGenerateContent?alt=sse` chunks to assistant-message events.

    Consecutive text parts (or thought parts) form one block; a function call is a block of its
    own, complete in one part. The stream has no end marker: it ends after the chunk with the
    `finishReason` (and the usage); a body that ends without one is an error.
    """

    complete_at_eof = True
    label = "Google"
    """How error texts name the API."""

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.open: _Open | None = None
        self.chunks = 0
        self.reason: Literal["stop", "length", "toolUse", "error"] | None = None
        self.raw_reason = ""
        self.blocked: str | None = None
        self.call_ids: set[str] = set()

    def feed(self, event: str, data: str) -> Iterable[AssistantMessageEvent]:
        payload = stream_object(data, self.secret)
        error = payload.get("error")
        if isinstance(error, Mapping):
            raise self._error(error)
        self.chunks += 1
        out: list[AssistantMessageEvent] = []
        feedback = payload.get("promptFeedback")
        if self.blocked is None and isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self.blocked = _prompt_block_error(self.label, feedback)
        response_id = payload.get("responseId")
        if not self.builder.response_id and isinstance(response_id, str) and response_id:
            self.builder.response_id = response_id
        candidates = payload.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, Mapping):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, Mapping) else None
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, Mapping):
                    self._part(part, out)
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason:
                self.raw_reason = reason
                mapped = map_stop_reason(reason)
                self.reason = "toolUse" if mapped == "stop" and self.call_ids else mapped
        usage = payload.get("usageMetadata")
        if isinstance(usage, Mapping):
            self._usage(usage)
        return out

    def _error(self, error: Mapping[str, Any]) -> ProviderError:
        code = error.get("code")
        message = as_str(error.get("message")) or "The server reported an error"
        status = as_str(error.get("status"))
        text = f"{message} ({status})" if status else message
        return ProviderError(text, retryable=code in _RETRYABLE_CODES)

    def _part(self, part: Mapping[str, Any], out: list[AssistantMessageEvent]) -> None:
        builder = self.builder
        text = part.get("text")
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        if isinstance(text, str):
            kind = "thinking" if part.get("thought") is True else "text"
            block = self.open
            if block is None or block.kind != kind:
                if block is not None:
                    out.append(self._end(block))
                start: Any = builder.thinking_start() if kind == "thinking" else builder.text_start()
                block = self.open = _Open(kind, start.content_index)
                out.append(start)
                self.has_content = True
            if signature is not None:  # kept when later parts of the block come without one
                block.signature = signature
            if kind == "thinking":
                out.append(builder.thinking_delta(text, block.index))
            else:
                out.append(builder.text_delta(text, block.index))
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            if self.open is not None:
                out.append(self._end(self.open))
                self.open = None
            name = as_str(call.get("name"))
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id or call_id in self.call_ids:
                call_id = f"{name}_{now_ms()}_{next(_call_numbers)}"
            self.call_ids.add(call_id)
            arguments = call.get("args")
            if not isinstance(arguments, Mapping):
                arguments = {}
            start = builder.tool_call_start(call_id, name)
            out.append(start)
            self.has_content = True
            out.append(builder.tool_call_delta(json_text(arguments, compact=True), arguments, start.content_index))
            done = ToolCall(call_id, name, dict(arguments), thought_signature=signature)
            out.append(builder.tool_call_end(done, start.content_index))

    def _end(self, block: _Open) -> AssistantMessageEvent:
        if block.kind == "thinking":
            return self.builder.thinking_end(block.index, signature=block.signature)
        return self.builder.text_end(block.index, signature=block.signature)

    def _usage(self, usage: Mapping[str, Any]) -> None:
        cached = as_int(usage.get("cachedContentTokenCount"))
        self.builder.usage = make_usage(
            self.model,
            input=as_int(usage.get("promptTokenCount")) - cached,
            output=as_int(usage.get("candidatesTokenCount")) + as_int(usage.get("thoughtsTokenCount")),
            cache_read=cached,
            total=as_int(usage.get("totalTokenCount")),
        )

    def finish(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        if self.open is not None:
            out.append(self._end(self.open))
            self.open = None
        if self.reason is None:
            chunks = f"{self.chunks} chunk{'' if self.chunks == 1 else 's'}"
            text = self.blocked or f"{self.label} stream ended without a finish reason after receiving {chunks}"
            out.append(self.builder.error("error", text))
        elif self.reason == "error":
            out.append(self.builder.error("error", f"Provider stopped with: {self.raw_reason}"))
        else:
            out.append(self.builder.done(self.reason))
        return out
