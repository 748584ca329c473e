"""API keys and tokens: where a provider's key comes from, a caller's token function, and the
redaction of both from every text a stream shows."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Awaitable, Callable

import anyio.to_thread

from .._types._messages import Model
from .._types._stream_fn import StreamOptions
from ._errors import ProviderError

__all__ = ("ENV_API_KEYS", "env_api_key", "fetch_token", "redact", "resolve_api_key")

ENV_API_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "azure": ("AZURE_OPENAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "google": ("GEMINI_API_KEY",),
}
"""Where a provider's key is looked up when `StreamOptions.api_key` is not given. Models of any
other provider (local servers: llama.cpp, Ollama, vLLM...) are called without a key."""


def env_api_key(provider: str) -> str | None:
    """The key of `provider` from its usual environment variable, if set."""
    for name in ENV_API_KEYS.get(provider, ()):
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve_api_key(model: Model, options: StreamOptions) -> str | None:
    """`options.api_key`, else the provider's environment variable; ProviderError when a known
    provider has neither."""
    if options.api_key:
        return options.api_key
    key = env_api_key(model.provider)
    if key is None and model.provider in ENV_API_KEYS:
        names = " or ".join(ENV_API_KEYS[model.provider])
        raise ProviderError(
            f"No API key for provider {model.provider!r}: set {names}, or pass api_key "
            "(AgentLoopConfig.api_key / get_api_key)."
        )
    return key


async def fetch_token(source: str | Callable[[], str | Awaitable[str]], what: str) -> str:
    """The token `source` gives: a str as it is, an async function's result, or a plain
    function's, run in a worker thread (it may block on the network, as a credential refresh
    does). ProviderError naming `what` when the function fails or gives no non-empty str."""
    token: object = source
    if callable(source):
        try:
            if inspect.iscoroutinefunction(source):
                token = await source()
            else:
                token = await anyio.to_thread.run_sync(source, abandon_on_cancel=True)
                if inspect.isawaitable(token):
                    token = await token
        except Exception as exc:
            raise ProviderError(f"{what} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(token, str) or not token:
        raise ProviderError(f"{what} returned {type(token).__name__}, not a token (a non-empty str)")
    return token


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced by `***`, also where JSON escapes spell
    any of its characters (`\\u0073k-...`, `\\/`, with the backslashes doubled or not, as raw
    bodies and `repr` show them): a text about to be decoded or cut is redacted first, so no
    part of the key survives the decoding or the cut."""
    if not secret or len(secret) < 4:
        return text
    if secret in text:
        text = text.replace(secret, "***")
    if "\\" in text:
        text = _escaped(secret).sub("***", text)
    return text


def _escaped(secret: str) -> re.Pattern[str]:
    """`secret` with each character as itself or as a JSON escape (one or more backslashes)."""
    parts = []
    for char in secret:
        spellings = [re.escape(char)]
        code = ord(char)
        if code <= 0xFFFF:
            spellings.append(r"\\+u" + "".join(f"[{d.lower()}{d.upper()}]" for d in f"{code:04x}"))
        if char in '"\\/':
            spellings.append(r"\\+" + re.escape(char))
        parts.append("(?:" + "|".join(spellings) + ")")
    return re.compile("".join(parts))
