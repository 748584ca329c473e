"""Building a provider's request: the URL, the headers, the JSON body and the pieces every
protocol's body is made of (text a server accepts, images, tool schemas, compat flags)."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._types._constants import LLM_MESSAGE_TYPES
from .._types._messages import Context, ImageContent, Model
from .._types._stream_fn import OutputSchema, StreamOptions
from ._errors import ProviderError

__all__ = (
    "Request",
    "base_url",
    "check_llm_messages",
    "compat",
    "data_url",
    "json_text",
    "native_output",
    "request_headers",
    "sanitize",
    "tool_specs",
)


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request of a provider: where, with which headers, and the JSON body."""

    url: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    secret: str | None = None
    """The API key, redacted from every error text."""
    auth: Any = None
    """An `httpx.Auth` that signs each attempt (AWS SigV4), or None."""

    def __repr__(self) -> str:
        return f"Request(url={self.url!r})"


def base_url(model: Model, default: str, env: str) -> str:
    """The model's base URL; an empty one, or the official one (`default`), is replaced by
    `$env` if set."""
    url = model.base_url or default
    if url == default:
        url = os.environ.get(env) or default
    return url.rstrip("/")


def request_headers(own: Mapping[str, str], model: Model, options: StreamOptions) -> dict[str, str]:
    """A request's headers: the provider's own (the key, the API version), then the model's, then
    the call's, each overriding the one before. `content-type` is set by the driver when none is."""
    return {**own, **(model.headers or {}), **(options.headers or {})}


def check_llm_messages(context: Context) -> None:
    """ProviderError when the context holds a message no model understands (a custom message that
    `convert_to_llm` left in), naming it, instead of failing somewhere in the conversion."""
    for i, message in enumerate(context.messages):
        if not isinstance(message, LLM_MESSAGE_TYPES):
            role = getattr(message, "role", None)
            raise ProviderError(
                f"context.messages[{i}] is a {type(message).__name__} (role {role!r}), which no model understands: "
                "convert_to_llm must turn custom messages into user, assistant or toolResult messages, or drop them"
            )


def compat(model: Model, name: str, default: Any) -> Any:
    """A per-model compat flag, by its snake_case name or the reference's camelCase name."""
    flags = model.compat
    if not flags:
        return default
    if name in flags:
        return flags[name]
    head, *rest = name.split("_")
    camel = head + "".join(part.capitalize() for part in rest)
    return flags.get(camel, default)


# --- the body ------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Drop lone UTF-16 surrogates, which servers reject in JSON bodies."""
    return _SURROGATE.sub("", text) if _SURROGATE.search(text) else text


def _server_safe(value: Any) -> Any:
    """`value` with lone surrogates dropped from strings and non-finite numbers as null."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {sanitize(k) if isinstance(k, str) else k: _server_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_server_safe(v) for v in value]
    return value


def json_text(value: Any, *, compact: bool = False) -> str:
    """JSON text a server accepts, whatever a model put in `value`.

    Lone surrogates (which UTF-8 cannot carry) are dropped, and NaN and the infinities become
    null, as JavaScript's `JSON.stringify` writes them: a model's odd output (tool arguments with
    `\\ud800` or `1e999`) must not make every later request of the conversation fail.
    """
    separators = (",", ":") if compact else None
    try:
        text = json.dumps(value, ensure_ascii=False, separators=separators, allow_nan=False)
        text.encode("utf-8")
    except ValueError:  # UnicodeEncodeError is a ValueError too
        text = json.dumps(_server_safe(value), ensure_ascii=False, separators=separators, allow_nan=False)
    return text


def data_url(image: ImageContent) -> str:
    """An image as a `data:` URL."""
    return f"data:{image.mime_type};base64,{image.data}"


def tool_specs(tools: Sequence[Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(name, description, JSON schema) of each tool of a context."""
    specs = []
    for tool in tools:
        parameters = getattr(tool, "parameters", None)
        if not isinstance(parameters, Mapping):
            parameters = {"type": "object", "properties": {}}
        specs.append((str(tool.name), str(getattr(tool, "description", "") or ""), parameters))
    return specs


def native_output(model: Model, options: StreamOptions, wire: str | None) -> dict[str, Any] | None:
    """The body's entry for `options.output_schema` in the provider's `wire` dialect (`chat`:
    Chat Completions' `response_format`; `responses`: Responses' `text.format`; `gemini`:
    `generationConfig` members), None without one; ProviderError for a provider without it
    (`wire` None), so the call fails instead of answering in free text."""
    output: OutputSchema | None = options.output_schema
    if output is None:
        return None
    if wire is None:
        raise ProviderError(
            f"The {model.api} API has no schema-constrained output (StreamOptions.output_schema): "
            "ask for the result through a tool instead"
        )
    schema = dict(output.schema)
    if wire == "chat":
        return {"type": "json_schema", "json_schema": {"name": output.name, "schema": schema, "strict": output.strict}}
    if wire == "responses":
        return {"type": "json_schema", "name": output.name, "schema": schema, "strict": output.strict}
    return {"responseMimeType": "application/json", "responseJsonSchema": schema}
