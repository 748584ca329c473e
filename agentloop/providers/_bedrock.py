"""Amazon Bedrock's Converse Stream API (`api="bedrock-converse-stream"`), over httpx.

The request is pi-ai's: the transcript as Converse messages (consecutive tool results in one user
message, images as bytes, reasoning replayed with its signature for Claude, redacted reasoning as
its bytes), a cache point after the system prompt and the last user message for the Claude models
that cache, thinking as `additionalModelRequestFields` (Claude's budget or adaptive effort, GPT's
and gpt-oss's effort). The answer is an AWS event stream (`_bedrock_stream`).

Authentication, as pi-ai resolves it: a bearer token (`options.api_key`, else
`$AWS_BEARER_TOKEN_BEDROCK`), else SigV4 signatures (botocore's `SigV4Auth`, each attempt signed
anew) with the credentials given to `stream_bedrock`, else those of AWS's usual chain as botocore
finds them (environment, shared config and credentials files and their profiles, SSO, container
and instance roles). `AWS_BEDROCK_SKIP_AUTH=1` signs with dummy keys, for proxies that need none.
Credentials are resolved, and botocore imported, in a worker thread: the event loop never waits
for a file or a metadata service.

botocore is the `bedrock` extra (`pip install 'anyio-agentloop[bedrock]'`); importing this module
does not import it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import anyio.to_thread
import httpx

from .._types._messages import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserContent,
)
from .._types._stream_fn import StreamOptions
from ._bedrock_stream import EVENT_STREAM, BedrockParser, http_error_text, read_event_stream
from ._errors import ProviderError
from ._http import AsyncClient, HTTPOptions, StreamFormat, run_stream
from ._request import Request, check_llm_messages, compat, native_output, sanitize, tool_specs
from ._stream import AssistantMessageEventStream
from ._transform import normalize_anthropic_id, transform_messages

__all__ = (
    "BEDROCK_EVENT_STREAM",
    "build_bedrock_request",
    "converse_body",
    "stream_bedrock",
)

BEDROCK_EVENT_STREAM = StreamFormat(EVENT_STREAM, read_event_stream, http_error_text)
"""The AWS event stream, and Bedrock's error types in error texts."""

_SIGNING_NAME = "bedrock"
_EMPTY = "<empty>"
_USER_IMAGE_OMITTED = "(image omitted: model does not support images)"
_TOOL_IMAGE_OMITTED = "(tool image omitted: model does not support images)"
_ERROR_IMAGE_MOVED = "(image attached after the tool results)"
_BINDING_BETA = "thinking-binding-controls-2026-08-01"
_INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
_IMAGE_FORMATS = {
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
}
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
_GPT_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
_GPT_OSS_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
_ARN_REGION = re.compile(r"^arn:aws(?:-[a-z0-9-]+)?:bedrock:([a-z0-9-]+):")
_STANDARD_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_RESERVED_HEADERS = frozenset({"authorization", "host"})
_UNSIGNED_HEADERS = frozenset(
    {"accept", "accept-encoding", "connection", "content-length", "expect", "host", "transfer-encoding", "user-agent"}
)
"""The headers left out of a signature: the transport's own (botocore signs the URL's host)."""


def stream_bedrock(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    http: HTTPOptions | None = None,
    client: AsyncClient | None = None,
    region: str | None = None,
    profile: str | None = None,
    credentials: Any = None,
) -> AssistantMessageEventStream:
    """Stream a response from Bedrock's Converse Stream API (`{endpoint}/model/{id}/converse-stream`).

    Arguments and result as `stream_openai_completions`, and:

    Args:
        region: The AWS region. Default: the region of an inference-profile ARN model id, else
            `$AWS_REGION`, `$AWS_DEFAULT_REGION`, the region of the model's `bedrock-runtime`
            base URL, the profile's region (when a profile is named), else `us-east-1`.
        profile: The AWS profile whose credentials and region are used (default: `$AWS_PROFILE`,
            else botocore's default chain).
        credentials: AWS credentials to sign with instead of the chain's: botocore's or boto3's
            (`boto3.Session().get_credentials()`, refreshed as they expire), or any object with
            `access_key`, `secret_key` and `token` attributes.

    The model's base URL is the endpoint when it is not a standard `bedrock-runtime` URL (a
    proxy, a VPC endpoint) or when no region is configured; otherwise the configured region's
    standard endpoint is used.
    """
    for name, value in (("region", region), ("profile", profile)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")
    if credentials is not None and not (
        callable(getattr(credentials, "get_frozen_credentials", None)) or hasattr(credentials, "secret_key")
    ):
        raise TypeError(
            "credentials must be botocore credentials or have access_key, secret_key and token attributes, "
            f"got {type(credentials).__name__}"
        )
    build = functools.partial(build_bedrock_request, region=region, profile=profile, credentials=credentials)
    return run_stream(
        model, context, options, build, BedrockParser, http=http, client=client, stream_format=BEDROCK_EVENT_STREAM
    )


# --- where the request goes, and who signs it ------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Frozen:
    access_key: str
    secret_key: str
    token: str | None

    def __repr__(self) -> str:
        return "_Frozen(***)"


class _SigV4(httpx.Auth):
    """Signs each attempt with botocore's SigV4 (the headers the request was built with, its
    host and its body; not the ones the transport adds)."""

    requires_request_body = True

    def __init__(self, credentials: _Frozen, region: str) -> None:
        self._credentials = credentials
        self._region = region

    @property
    def session_token(self) -> str | None:
        return self._credentials.token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        headers = {k: v for k, v in request.headers.items() if k.lower() not in _UNSIGNED_HEADERS}
        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        c = self._credentials
        SigV4Auth(Credentials(c.access_key, c.secret_key, c.token), _SIGNING_NAME, self._region).add_auth(signed)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = signed.headers.get(name)
            if value is not None:
                request.headers[name] = value
        yield request

    def __repr__(self) -> str:
        return f"<SigV4 signature for {_SIGNING_NAME} in {self._region}>"


@dataclass(frozen=True, slots=True)
class _Target:
    endpoint: str
    region: str
    bearer: str | None = field(repr=False)
    signer: _SigV4 | None

    @property
    def secret(self) -> str | None:
        """What the request carries that must never be shown: the bearer token, or the session
        token (the secret key itself is never sent)."""
        return self.bearer if self.signer is None else self.signer.session_token


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _configured_region(region: str | None) -> str | None:
    return region or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION")


def _standard_region(url: str) -> str | None:
    """The region of a standard `bedrock-runtime.<region>.amazonaws.com` URL."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    match = _STANDARD_HOST.match(host)
    return match[1] if match else None


def _endpoint(region: str) -> str:
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"https://bedrock-runtime.{region}{suffix}"


def _resolve(model: Model, api_key: str | None, region: str | None, profile: str | None, credentials: Any) -> _Target:
    """Where the request goes and how it is authenticated (blocking: files, metadata services)."""
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    import botocore.eventstream  # read on the event loop later, imported here
    import botocore.session
    from botocore.exceptions import BotoCoreError

    named_profile = profile or _env("AWS_PROFILE")
    configured = _configured_region(region)
    endpoint_region = _standard_region(model.base_url)
    explicit = bool(model.base_url) and (endpoint_region is None or (not configured and not named_profile))
    session: Any = None
    arn = _ARN_REGION.match(model.id)
    try:
        if arn:
            where = arn[1]
        elif configured:
            where = configured
        elif endpoint_region and explicit:
            where = endpoint_region
        elif not named_profile:
            where = "us-east-1"
        else:
            session = botocore.session.Session(profile=profile)
            where = session.get_config_variable("region")
            if not where:
                raise ProviderError(
                    f"No AWS region for profile {named_profile!r}: set its region, AWS_REGION, or pass region="
                )
        endpoint = model.base_url.rstrip("/") if explicit else _endpoint(where)
        if _env("AWS_BEDROCK_SKIP_AUTH") == "1":
            return _Target(endpoint, where, None, _SigV4(_Frozen("dummy-access-key", "dummy-secret-key", None), where))
        if credentials is not None:
            return _Target(endpoint, where, None, _SigV4(_frozen(credentials), where))
        bearer = api_key or _env("AWS_BEARER_TOKEN_BEDROCK")
        if bearer:
            return _Target(endpoint, where, bearer, None)
        if session is None:
            session = botocore.session.Session(profile=profile)
        found = session.get_credentials()
        if found is None:
            raise ProviderError(
                "No AWS credentials for Amazon Bedrock: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK, or pass api_key (a bearer token) or credentials="
            )
        return _Target(endpoint, where, None, _SigV4(_frozen(found), where))
    except BotoCoreError as exc:
        raise ProviderError(f"Could not resolve AWS credentials: {exc}") from None


def _frozen(credentials: Any) -> _Frozen:
    freeze = getattr(credentials, "get_frozen_credentials", None)
    frozen = freeze() if callable(freeze) else credentials
    access, secret, token = (getattr(frozen, name, None) for name in ("access_key", "secret_key", "token"))
    if not isinstance(access, str) or not access or not isinstance(secret, str) or not secret:
        raise ProviderError("The AWS credentials have no access key or secret key")
    return _Frozen(access, secret, token if isinstance(token, str) and token else None)


async def build_bedrock_request(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    region: str | None = None,
    profile: str | None = None,
    credentials: Any = None,
) -> Request:
    """The `Request` for one response (credentials resolved in a worker thread)."""
    body = converse_body(model, context, options, region=_configured_region(region))
    target = await anyio.to_thread.run_sync(
        functools.partial(_resolve, model, options.api_key, region, profile, credentials), abandon_on_cancel=True
    )
    headers = {"content-type": "application/json"}
    for name, value in {**(model.headers or {}), **(options.headers or {})}.items():
        lower = name.lower()
        if lower not in _RESERVED_HEADERS and not lower.startswith("x-amz-"):
            headers[name] = value
    if target.bearer is not None:
        headers["authorization"] = f"Bearer {target.bearer}"
    url = f"{target.endpoint}/model/{quote(model.id, safe='')}/converse-stream"
    return Request(url, headers, body, target.secret, auth=target.signer)


# --- the model's abilities, as pi-ai tells them ----------------------------------------------


def _candidates(model: Model) -> list[str]:
    """The model's id and name, lower case, also with `_ . :` and spaces as dashes."""
    out = []
    for value in (model.id, model.name) if model.name else (model.id,):
        lower = value.lower()
        out += [lower, re.sub(r"[\s_.:]+", "-", lower)]
    return out


def _any(model: Model, *parts: str) -> bool:
    return any(part in candidate for candidate in _candidates(model) for part in parts)


def _is_claude(model: Model) -> bool:
    model_id, name = model.id.lower(), model.name.lower()
    return any(s in model_id or s in name for s in ("anthropic.claude", "anthropic/claude")) or "claude" in name


_CLAUDE_NEXT = ("opus-4-7", "opus-4-8", "opus-5", "sonnet-5", "haiku-5", "fable-5")


def _adaptive(model: Model) -> bool:
    return _any(model, "opus-4-6", "sonnet-4-6", *_CLAUDE_NEXT)


def _prompt_caching(model: Model) -> bool:
    if not _any(model, "claude"):
        return _env("AWS_BEDROCK_FORCE_CACHE") == "1"
    return _any(model, "fable-5", "opus-5", "sonnet-5", "haiku-5", "-4-", "claude-3-7-sonnet", "claude-3-5-haiku")


def _gov_cloud(model: Model, region: str | None) -> bool:
    model_id = model.id.lower()
    return bool(region and region.lower().startswith("us-gov-")) or model_id.startswith(("us-gov.", "arn:aws-us-gov:"))


def _level_map(model: Model) -> Mapping[str, Any]:
    value = compat(model, "thinking_level_map", None)
    return value if isinstance(value, Mapping) else {}


def _effort(model: Model, level: str) -> str:
    if level == "xhigh" and _any(model, *_CLAUDE_NEXT):
        return "xhigh"
    mapped = _level_map(model).get(level)
    if isinstance(mapped, str):
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium"}.get(level, "high")


# --- the body --------------------------------------------------------------------------------


def converse_body(
    model: Model, context: Context, options: StreamOptions, *, region: str | None = None
) -> dict[str, Any]:
    """The Converse request body (its JSON form: bytes as base64) of one response.

    `region` (the configured one) tells whether the target is GovCloud, whose Claude models take
    no thinking `display`.
    """
    check_llm_messages(context)
    native_output(model, options, None)  # none on this wire: an output schema fails the call
    level = options.reasoning if options.reasoning not in (None, "off") and model.reasoning else None
    claude = _is_claude(model)
    max_tokens = options.max_tokens or model.max_tokens or None
    budget = 0
    if level is not None and claude and not _adaptive(model):
        clamped = "high" if level in ("xhigh", "max") else level
        budget = int({**_BUDGETS, **(options.thinking_budgets or {})}.get(clamped, _BUDGETS["high"]))
        if max_tokens is not None:
            max_tokens = min(max_tokens + budget, model.max_tokens) if model.max_tokens else max_tokens + budget
            budget = min(budget, max(0, max_tokens - 1024))
    cache = _prompt_caching(model)
    body: dict[str, Any] = {"messages": _messages(model, context, cache)}
    if context.system_prompt:
        system: list[dict[str, Any]] = [{"text": sanitize(context.system_prompt)}]
        if cache:
            system.append({"cachePoint": {"type": "default"}})
        body["system"] = system
    inference: dict[str, Any] = {}
    if max_tokens is not None:
        inference["maxTokens"] = max_tokens
    if options.temperature is not None:
        inference["temperature"] = options.temperature
    body["inferenceConfig"] = inference
    if context.tools:
        body["toolConfig"] = {
            "tools": [
                {"toolSpec": {"name": name, "description": description, "inputSchema": {"json": parameters}}}
                for name, description, parameters in tool_specs(context.tools)
            ]
        }
    if level is not None:
        fields = _thinking_fields(model, level, budget, region)
        if fields is not None:
            body["additionalModelRequestFields"] = fields
    return body


def _thinking_fields(model: Model, level: str, budget: int, region: str | None) -> dict[str, Any] | None:
    if _is_claude(model):
        gov = _gov_cloud(model, region)
        display = {} if gov else {"display": "summarized"}
        if _adaptive(model):
            binding = not gov and _any(model, *_CLAUDE_NEXT)
            thinking: dict[str, Any] = {"type": "adaptive", **display}
            if binding:
                thinking["block_binding"] = {"prefix_mismatch_behavior": "drop_block"}
            fields: dict[str, Any] = {"thinking": thinking, "output_config": {"effort": _effort(model, level)}}
            if binding:
                fields["anthropic_beta"] = [_BINDING_BETA]
            return fields
        return {
            "thinking": {"type": "enabled", "budget_tokens": budget, **display},
            "anthropic_beta": [_INTERLEAVED_BETA],
        }
    if _any(model, "gpt-oss"):
        return {"reasoning_effort": _GPT_OSS_EFFORT[level]}
    if _any(model, "gpt-"):
        mapped = _level_map(model).get(level)
        return {"reasoning": {"effort": mapped if isinstance(mapped, str) else _GPT_EFFORT[level]}}
    return None


def _image(block: ImageContent) -> dict[str, Any]:
    image_format = _IMAGE_FORMATS.get(block.mime_type)
    if image_format is None:
        raise ProviderError(f"Unknown image type: {block.mime_type}")
    return {"image": {"format": image_format, "source": {"bytes": block.data}}}


def _text(text: str) -> dict[str, Any] | None:
    clean = sanitize(text)
    return {"text": clean} if clean.strip() else None


def _without_images(content: tuple[UserContent, ...], placeholder: str) -> tuple[UserContent, ...]:
    """Images as one placeholder text per run of images (pi-ai's downgrade for non-vision models)."""
    out: list[UserContent] = []
    after_placeholder = False
    for block in content:
        if isinstance(block, ImageContent):
            if not after_placeholder:
                out.append(TextContent(placeholder))
            after_placeholder = True
            continue
        out.append(block)
        after_placeholder = block.text == placeholder
    return tuple(out)


def _user_content(content: str | tuple[UserContent, ...], images_ok: bool) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_text(content) or {"text": _EMPTY}]
    if not images_ok:
        content = _without_images(content, _USER_IMAGE_OMITTED)
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ImageContent):
            parts.append(_image(block))
        else:
            part = _text(block.text)
            if part is not None:
                parts.append(part)
    return parts or [{"text": _EMPTY}]


def _document(value: Any) -> Any:
    """Tool arguments as a Converse document: objects lose their empty keys (Bedrock rejects them)."""
    if isinstance(value, Mapping):
        return {k: _document(v) for k, v in value.items() if k != ""}
    if isinstance(value, (list, tuple)):
        return [_document(v) for v in value]
    return value


def _assistant_content(model: Model, message: AssistantMessage) -> list[dict[str, Any]]:
    claude = _is_claude(model)
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            part = _text(block.text)
            if part is not None:
                blocks.append(part)
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                try:
                    data = base64.b64decode(block.thinking_signature or "", validate=True)
                except (binascii.Error, ValueError):
                    continue  # a payload that is not base64 (edited by hand): dropped
                if data:
                    blocks.append({"reasoningContent": {"redactedContent": base64.b64encode(data).decode("ascii")}})
                continue
            thinking = sanitize(block.thinking)
            if not thinking.strip():
                continue
            if not claude:  # only Claude takes a signature
                blocks.append({"reasoningContent": {"reasoningText": {"text": thinking}}})
            elif not (block.thinking_signature or "").strip():  # unsigned: Bedrock rejects it as reasoning
                blocks.append({"text": thinking})
            else:
                text = {"text": thinking, "signature": block.thinking_signature}
                blocks.append({"reasoningContent": {"reasoningText": text}})
        else:
            blocks.append({"toolUse": {"toolUseId": block.id, "name": block.name, "input": _document(block.arguments)}})
    return blocks


def _messages(model: Model, context: Context, cache: bool) -> list[dict[str, Any]]:
    images_ok = "image" in model.input
    claude = _is_claude(model)
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []  # Claude: the images of error results, after all the results

    def flush_results() -> None:
        if results:
            out.append({"role": "user", "content": [*results, *moved]})
            results.clear()
            moved.clear()

    for message in transform_messages(context.messages, model, normalize_anthropic_id):
        if isinstance(message, ToolResultMessage):
            content = message.content
            if not images_ok:
                content = _without_images(content, _TOOL_IMAGE_OMITTED)
            images = [b for b in content if isinstance(b, ImageContent)]
            if claude and message.is_error and images:
                moved.append(
                    {"text": f"Images from the error result of tool call {message.tool_call_id} ({message.tool_name}):"}
                )
                moved.extend(_image(image) for image in images)
                content = _without_images(content, _ERROR_IMAGE_MOVED)
            status = "error" if message.is_error else "success"
            result = {"toolUseId": message.tool_call_id, "content": _user_content(content, True), "status": status}
            results.append({"toolResult": result})
            continue
        flush_results()
        if isinstance(message, AssistantMessage):
            if message.content:
                blocks = _assistant_content(model, message)
                if blocks:
                    out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": _user_content(message.content, images_ok)})
    flush_results()
    if cache and out and out[-1]["role"] == "user":
        out[-1]["content"].append({"cachePoint": {"type": "default"}})
    return out
