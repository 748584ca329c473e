"""LLM providers: stream functions for OpenAI Chat Completions, OpenAI Responses, Anthropic
Messages, Azure OpenAI (Responses), Mistral, the Gemini API, Vertex AI and Amazon Bedrock's
Converse Stream over httpx, a model registry, and `stream_simple`, which dispatches on
`model.api`.

Every stream function has the signature of `agentloop.StreamFn` (plus keyword-only `http=` and
`client=`) and returns an `AssistantMessageEventStream`: iterate it (preferably inside
`async with`) or `await stream.result()`. It never raises once returned: HTTP errors, malformed
data, truncated streams and errors the model reports end it with one `error` event, partial
content kept; an abort of `options.signal` ends it with reason `aborted`.

Importing `agentloop` does not import this package (nor httpx): the default stream function
loads it on first use.

How a provider module is built (`_anthropic.py` is a complete one): a `build_*_request(model,
context, options) -> Request` (URL, headers, JSON body; it may raise `ProviderError`, which
becomes the terminal `error` event), an `SSEParser` subclass whose `feed` turns one server-sent
event into events through the `AssistantMessageBuilder` and whose `finish` closes the open blocks
and ends with `done` or `error`, and a stream function that hands both to `_http.run_stream`
(which does the I/O, retries, abort, timeouts and size limits; a wire that is not server-sent
events names its framing with a `StreamFormat`, as Bedrock's AWS event stream does, and a build
that must wait, for credentials say, is an `async` function). Its registry entry in
`_registry.API_STREAMS` makes `stream_simple` dispatch to it by `model.api`. The pieces each
module uses come from single-purpose modules: `_errors` (`ProviderError`), `_auth` (keys and
their redaction), `_request` (the request and its body's parts), `_thinking` (levels and
budgets), `_parse` (the parser base class and JSON field readers), `_usage` (tokens and cost),
`_stream` (the stream object and the argument check), `_cache` (prompt caching),
`_json_stream` and `_streaming_json` (tool-call arguments), `_transform` (replaying another
model's transcript); `_failures` and `_fallback` sit on top of the stream functions.

The events and final messages are pi-ai 1.6.1's for the same bytes (checked on recorded streams
by `tests/providers/test_differential.py`), except where agentloop keeps its own reading on
purpose: the list, each with its reason, is in the documentation's "Models and providers" page
("Deliberate differences from pi-ai").

Around the stream functions: `is_context_overflow`, `is_retryable_error` and
`is_unavailable_model` read a failed message (pi-ai's `isContextOverflow` and
`isRetryableAssistantError`), and `fallback_stream` tries further models when one fails before
answering. `StreamOptions.cache_retention` sets the prompt cache (pi-ai's `cacheRetention`).
"""

from __future__ import annotations

from ._anthropic import stream_anthropic as stream_anthropic
from ._auth import ENV_API_KEYS as ENV_API_KEYS
from ._azure import azure_openai_model as azure_openai_model
from ._azure import stream_azure_openai_responses as stream_azure_openai_responses
from ._bedrock import stream_bedrock as stream_bedrock
from ._failures import is_context_overflow as is_context_overflow
from ._failures import is_retryable_error as is_retryable_error
from ._failures import is_unavailable_model as is_unavailable_model
from ._fallback import fallback_stream as fallback_stream
from ._fallback import should_fall_back as should_fall_back
from ._google import stream_google as stream_google
from ._google_vertex import stream_google_vertex as stream_google_vertex
from ._http import HTTPOptions as HTTPOptions
from ._json_stream import parse_streaming_json as parse_streaming_json
from ._mistral import stream_mistral as stream_mistral
from ._openai_completions import stream_openai_completions as stream_openai_completions
from ._openai_responses import stream_openai_responses as stream_openai_responses
from ._proxy._client import ProxyStreamFn as ProxyStreamFn
from ._proxy._client import stream_proxy as stream_proxy
from ._proxy._server import proxy_app as proxy_app
from ._registry import API_STREAMS as API_STREAMS
from ._registry import get_model as get_model
from ._registry import get_models as get_models
from ._registry import get_providers as get_providers
from ._registry import local_model as local_model
from ._registry import openai_compatible_model as openai_compatible_model
from ._registry import register_model as register_model
from ._registry import stream_simple as stream_simple
from ._stream import AssistantMessageEventStream as AssistantMessageEventStream
from ._transform import transform_messages as transform_messages
from ._usage import calculate_cost as calculate_cost

__all__ = (
    "API_STREAMS",
    "ENV_API_KEYS",
    "AssistantMessageEventStream",
    "HTTPOptions",
    "ProxyStreamFn",
    "azure_openai_model",
    "calculate_cost",
    "fallback_stream",
    "get_model",
    "get_models",
    "get_providers",
    "is_context_overflow",
    "is_retryable_error",
    "is_unavailable_model",
    "local_model",
    "openai_compatible_model",
    "parse_streaming_json",
    "proxy_app",
    "register_model",
    "should_fall_back",
    "stream_anthropic",
    "stream_azure_openai_responses",
    "stream_bedrock",
    "stream_google",
    "stream_google_vertex",
    "stream_mistral",
    "stream_openai_completions",
    "stream_openai_responses",
    "stream_proxy",
    "stream_simple",
    "transform_messages",
)
