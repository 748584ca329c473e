"""`proxy_app` sends a provider's key only to a host bound to that provider.

The client picks the key (`provider`) and where the request goes (`api`, `baseUrl`) separately;
each shape that once sent a server key where it did not belong is refused with 400 before any
request goes out. The stream function is the real dispatcher over an `httpx.MockTransport` that
records every request that would leave the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from agentloop import Context, Model, StreamOptions
from agentloop.providers import AssistantMessageEventStream, proxy_app, register_model, stream_simple

TOKEN = "proxy-token"
URL = "http://proxy.test/api/stream"
LOCAL = "http://127.0.0.1:8080/v1"  # a keyless local server the operator allows
OPENAI_KEY = "sk-openai-server-key-0123456789"
ANTHROPIC_KEY = "sk-ant-server-key-0123456789"
OPENAI = "https://api.openai.com/v1"
ALLOWED = [OPENAI, "https://api.anthropic.com", LOCAL]


@pytest.fixture(autouse=True)
def server_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


class Upstream:
    """Stands for every provider: records the requests that went out and answers each with a 400
    (which is not retried)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(400, json={"error": {"message": "upstream reached"}})

    def stream_fn(self, client: httpx.AsyncClient) -> Any:
        def stream(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
            return stream_simple(model, context, options, client=client)

        return stream

    def keys(self) -> list[str | None]:
        return [r.headers.get("authorization") or r.headers.get("x-api-key") for r in self.requests]


async def post(model: dict[str, Any], **app_options: Any) -> tuple[httpx.Response, Upstream]:
    upstream = Upstream()
    allowed = app_options.pop("allowed_base_urls", ALLOWED)
    if allowed is not None:  # None: the default list
        app_options["allowed_base_urls"] = allowed
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as out:
            app = proxy_app(upstream.stream_fn(out), token=TOKEN, **app_options)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app)) as client:
                body = {"model": {"id": "m", **model}, "context": {"messages": []}, "options": {}}
                response = await client.post(URL, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    return response, upstream


@pytest.mark.parametrize(
    ("provider", "api", "base_url", "sent_to"),
    [
        # A keyless local server the operator allowed, named with a keyed provider.
        ("openai", "openai-completions", LOCAL, "http://127.0.0.1:8080"),
        ("openai", "openai-responses", LOCAL, "http://127.0.0.1:8080"),
        ("anthropic", "anthropic-messages", LOCAL, "http://127.0.0.1:8080"),
        # One provider's key to another provider's endpoint.
        ("anthropic", "openai-completions", "", "https://api.openai.com:443"),
        ("anthropic", "openai-completions", "https://api.openai.com/v1", "https://api.openai.com:443"),
        ("openai", "anthropic-messages", "", "https://api.anthropic.com:443"),
        ("openai", "openai-completions", "https://api.anthropic.com", "https://api.anthropic.com:443"),
    ],
)
async def test_a_key_is_never_sent_to_a_host_not_bound_to_its_provider(
    anyio_backend: object, provider: str, api: str, base_url: str, sent_to: str
) -> None:
    response, upstream = await post({"provider": provider, "api": api, "baseUrl": base_url})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith(f"Invalid request: the key of provider {provider!r} is sent only to https://api.")
    assert f"would send it to {sent_to}" in error
    assert "key_base_urls" in error
    assert upstream.requests == []


async def test_the_anthropic_key_never_reaches_openai_base_url_from_the_environment(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With $OPENAI_BASE_URL set, the default list and no base URL from the client."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gateway.example/v1")
    response, upstream = await post({"provider": "anthropic", "api": "openai-completions"}, allowed_base_urls=None)
    assert response.status_code == 400
    assert "would send it to https://gateway.example:443" in response.json()["error"]
    assert upstream.requests == []
    # The OpenAI key goes there: the operator set that endpoint for OpenAI.
    response, upstream = await post({"provider": "openai", "api": "openai-completions"}, allowed_base_urls=None)
    assert response.status_code == 200
    assert [str(r.url) for r in upstream.requests] == ["https://gateway.example/v1/chat/completions"]
    assert upstream.keys() == [f"Bearer {OPENAI_KEY}"]


@pytest.mark.parametrize(
    ("provider", "api", "base_url", "url", "key"),
    [
        ("openai", "openai-completions", "", "https://api.openai.com/v1/chat/completions", f"Bearer {OPENAI_KEY}"),
        ("openai", "openai-responses", OPENAI, OPENAI + "/responses", f"Bearer {OPENAI_KEY}"),
        ("anthropic", "anthropic-messages", "", "https://api.anthropic.com/v1/messages", ANTHROPIC_KEY),
        ("local", "openai-completions", LOCAL, LOCAL + "/chat/completions", None),  # no key to bind
    ],
)
async def test_a_key_goes_to_its_own_providers_endpoint(
    anyio_backend: object, provider: str, api: str, base_url: str, url: str, key: str | None
) -> None:
    response, upstream = await post({"provider": provider, "api": api, "baseUrl": base_url})
    assert response.status_code == 200
    assert [str(r.url) for r in upstream.requests] == [url]
    assert upstream.keys() == [key]


async def test_key_base_urls_bind_more_hosts_to_a_provider(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROQ_API_KEY", "gsk-server-key-0123456789")
    groq = {"provider": "groq", "api": "openai-completions", "baseUrl": "https://api.groq.com/openai/v1"}
    allowed = [*ALLOWED, "https://api.groq.com"]
    response, upstream = await post(groq, allowed_base_urls=allowed)
    assert (
        response.status_code == 400 and "the key of provider 'groq' is sent only to no host" in response.json()["error"]
    )
    assert upstream.requests == []
    bound = {"groq": ["https://api.groq.com/openai/v1"]}
    response, upstream = await post(groq, allowed_base_urls=allowed, key_base_urls=bound)
    assert response.status_code == 200 and upstream.keys() == ["Bearer gsk-server-key-0123456789"]
    response, upstream = await post({**groq, "baseUrl": LOCAL}, allowed_base_urls=allowed, key_base_urls=bound)
    assert response.status_code == 400 and "sent only to https://api.groq.com:443" in response.json()["error"]
    assert upstream.requests == []


@pytest.fixture
def registered_box() -> Iterator[None]:
    remove = register_model(Model(id="box-model", api="openai-completions", provider="box", base_url=LOCAL))
    yield
    remove()


@pytest.mark.usefixtures("registered_box")
async def test_a_registered_model_binds_its_providers_key_to_its_endpoint(anyio_backend: object) -> None:
    def get_api_key(provider: str) -> str | None:
        return "box-key-0123456789" if provider == "box" else None

    box = {"provider": "box", "api": "openai-completions"}
    response, upstream = await post({**box, "baseUrl": LOCAL}, get_api_key=get_api_key)
    assert response.status_code == 200 and upstream.keys() == ["Bearer box-key-0123456789"]
    response, upstream = await post({**box, "baseUrl": "https://api.openai.com/v1"}, get_api_key=get_api_key)
    assert response.status_code == 400 and "sent only to http://127.0.0.1:8080" in response.json()["error"]
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("key_base_urls", "error", "match"),
    [
        ("https://x.test", TypeError, "key_base_urls must map provider names to lists of URLs"),
        ({"groq": "https://api.groq.com"}, TypeError, "key_base_urls must map provider names to lists of URLs"),
        ({"groq": ["api.groq.com"]}, ValueError, r"key_base_urls\['groq'\] holds 'api.groq.com': expected http"),
        ({"groq": ["*"]}, ValueError, r"key_base_urls\['groq'\] holds '\*'"),
    ],
)
def test_bad_key_base_urls_are_refused_by_name(key_base_urls: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        proxy_app(stream_simple, token=TOKEN, key_base_urls=key_base_urls)
