"""Amazon Bedrock's Converse Stream: where the request goes and how it is signed, the AWS event
stream read within its limits, errors, retries and abort (httpx.MockTransport, recorded streams
of `bedrock_wire/recordings`)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agentloop import Agent, Context, ErrorEvent, Model, ModelCost, ThinkingContent, ToolCall
from agentloop.providers import HTTPOptions, _bedrock, get_model, get_models, stream_bedrock, stream_simple

from .helpers import FAST, Server, chunks, collect, context, options, split, streamed, types

RECORDINGS = Path(__file__).parent / "bedrock_wire" / "recordings"
EVENT_STREAM = {"content-type": "application/vnd.amazon.eventstream"}
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
QUOTED = CLAUDE.replace(":", "%3A")


def recording(name: str) -> bytes:
    return (RECORDINGS / f"{name}.eventstream").read_bytes()


def first_messages(body: bytes, count: int) -> bytes:
    """The first `count` event-stream messages of a body (their lengths read by botocore)."""
    from botocore.eventstream import EventStreamBuffer

    decoder = EventStreamBuffer()
    decoder.add_data(body)
    return body[: sum(message.prelude.total_length for _, message in zip(range(count), decoder, strict=False))]


def answer(body: bytes | list[bytes] | AsyncIterator[bytes], status: int = 200) -> httpx.Response:
    content: Any = chunks(body) if isinstance(body, list) else body
    return httpx.Response(status, headers=EVENT_STREAM, content=content)


def bedrock(**kwargs: Any) -> Model:
    kwargs.setdefault("id", CLAUDE)
    kwargs.setdefault("name", "Claude Sonnet 4.5 (US)")
    kwargs.setdefault("base_url", "https://bedrock-runtime.us-east-1.amazonaws.com")
    return Model(api="bedrock-converse-stream", provider="amazon-bedrock", reasoning=True, max_tokens=1000, **kwargs)


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No AWS setting of the machine reaches a test: empty config files, no instance metadata."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_BEDROCK_SKIP_AUTH",
        "AWS_BEDROCK_FORCE_CACHE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text("")
    (tmp_path / "credentials").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield tmp_path


async def ask(
    server: Server, model: Model | None = None, *, http: HTTPOptions = FAST, **kwargs: Any
) -> tuple[list[Any], Any]:
    opts = options(**{k: v for k, v in kwargs.items() if k not in ("region", "profile", "credentials")})
    extra = {k: v for k, v in kwargs.items() if k in ("region", "profile", "credentials")}
    async with server.client() as client:
        with anyio.fail_after(30):
            return await collect(stream_bedrock(model or bedrock(), context(), opts, http=http, client=client, **extra))


def resigned(request: httpx.Request, key: str, secret: str, token: str | None, region: str) -> str:
    """The Authorization botocore computes for the request as it was sent, at its own X-Amz-Date."""
    import datetime
    from unittest import mock

    when = datetime.datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    signed_names = request.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    headers = {name: request.headers[name] for name in signed_names if name != "host"}
    aws = AWSRequest(method="POST", url=str(request.url), data=request.content, headers=headers)
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        SigV4Auth(Credentials(key, secret, token), "bedrock", region).add_auth(aws)
    return str(aws.headers["Authorization"])


# --- where the request goes, and its authentication ------------------------------------------


async def test_a_bearer_token_is_sent_as_authorization_and_never_shown() -> None:
    body = json.dumps({"message": "bad token tok-secret-123"})
    server = Server(
        httpx.Response(403, headers={"x-amzn-errortype": "AccessDeniedException:http://internal"}, content=body)
    )
    _, final = await ask(server, api_key="tok-secret-123")
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer tok-secret-123"
    assert "x-amz-date" not in request.headers
    assert str(request.url) == f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{QUOTED}/converse-stream"
    assert final.error_message == "AccessDeniedException: bad token ***"


async def test_the_bearer_token_comes_from_aws_bearer_token_bedrock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "env-token")
    server = Server(answer(recording("synthetic-text")))
    _, final = await ask(server, api_key=None)
    assert server.requests[0].headers["authorization"] == "Bearer env-token"
    assert final.text == "Hello, world! \u00e9\U0001f600"


async def test_credentials_from_the_environment_sign_each_attempt_with_sigv4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env/secret+key")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-xyz")
    error = json.dumps({"message": "slow down session-token-xyz"})
    throttled = httpx.Response(429, headers={"x-amzn-errortype": "ThrottlingException"}, content=error)
    server = Server(throttled, answer(recording("synthetic-text")))
    _, final = await ask(server, api_key=None)
    assert final.stop_reason == "stop"
    assert len(server.requests) == 2
    for request in server.requests:
        authorization = request.headers["authorization"]
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDENV/")
        assert "/us-east-1/bedrock/aws4_request" in authorization
        assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token," in authorization
        assert request.headers["x-amz-security-token"] == "session-token-xyz"
        # what was sent is what was signed
        assert resigned(request, "AKIDENV", "env/secret+key", "session-token-xyz", "us-east-1") == authorization


async def test_the_session_token_is_redacted_from_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-xyz")
    body = json.dumps({"message": "The security token session-token-xyz is invalid"})
    server = Server(httpx.Response(403, headers={"x-amzn-errortype": "UnrecognizedClientException"}, content=body))
    _, final = await ask(server, api_key=None)
    assert final.error_message == "UnrecognizedClientException: The security token *** is invalid"


async def test_a_profile_gives_its_credentials_and_region(no_aws_environment: Path) -> None:
    (no_aws_environment / "config").write_text("[profile dev]\nregion = eu-west-3\n")
    (no_aws_environment / "credentials").write_text(
        "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = dev-secret\n"
    )
    server = Server(answer(recording("synthetic-text")))
    _, final = await ask(server, api_key=None, profile="dev")
    request = server.requests[0]
    assert final.stop_reason == "stop"
    assert request.url.host == "bedrock-runtime.eu-west-3.amazonaws.com"
    assert "Credential=AKIDDEV/" in request.headers["authorization"]
    assert "/eu-west-3/bedrock/aws4_request" in request.headers["authorization"]
    assert resigned(request, "AKIDDEV", "dev-secret", None, "eu-west-3") == request.headers["authorization"]


async def test_aws_profile_names_the_profile(monkeypatch: pytest.MonkeyPatch, no_aws_environment: Path) -> None:
    (no_aws_environment / "config").write_text("[profile ops]\nregion = ap-northeast-1\n")
    (no_aws_environment / "credentials").write_text("[ops]\naws_access_key_id = AKIDOPS\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_PROFILE", "ops")
    server = Server(answer(recording("synthetic-text")))
    await ask(server, api_key=None)
    assert server.requests[0].url.host == "bedrock-runtime.ap-northeast-1.amazonaws.com"
    assert "Credential=AKIDOPS/" in server.requests[0].headers["authorization"]


async def test_a_missing_profile_is_one_error_event() -> None:
    _, final = await ask(Server(), api_key=None, profile="nowhere")
    assert final.stop_reason == "error"
    assert final.error_message.startswith("Could not resolve AWS credentials: The config profile (nowhere)")


async def test_the_region_of_an_inference_profile_arn_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    arn = "arn:aws:bedrock:ap-south-1:123456789012:application-inference-profile/abc"
    server = Server(answer(recording("synthetic-text")))
    await ask(server, bedrock(id=arn, base_url=""), api_key=None, credentials=Credentials("AKID", "s"))
    request = server.requests[0]
    assert request.url.host == "bedrock-runtime.ap-south-1.amazonaws.com"
    assert request.url.raw_path.decode() == (
        "/model/arn%3Aaws%3Abedrock%3Aap-south-1%3A123456789012%3Aapplication-inference-profile%2Fabc/converse-stream"
    )
    assert "/ap-south-1/bedrock/aws4_request" in request.headers["authorization"]
    assert resigned(request, "AKID", "s", None, "ap-south-1") == request.headers["authorization"]


async def test_a_configured_region_picks_its_standard_endpoint_over_the_catalogue_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    server = Server(answer(recording("synthetic-text")), answer(recording("synthetic-text")))
    await ask(server, api_key="t")
    await ask(server, api_key="t", region="cn-north-1")
    assert [r.url.host for r in server.requests] == [
        "bedrock-runtime.eu-central-1.amazonaws.com",
        "bedrock-runtime.cn-north-1.amazonaws.com.cn",
    ]


async def test_a_custom_base_url_is_the_endpoint_and_signs_for_the_region() -> None:
    server = Server(answer(recording("synthetic-text")), answer(recording("synthetic-text")))
    proxy = bedrock(base_url="http://127.0.0.1:9/bedrock/")
    await ask(server, proxy, api_key=None, region="eu-west-1", credentials=Credentials("AKID", "s"))
    await ask(server, proxy, api_key=None, credentials=Credentials("AKID", "s"))
    first, second = server.requests
    assert str(first.url) == f"http://127.0.0.1:9/bedrock/model/{QUOTED}/converse-stream"
    assert "/eu-west-1/bedrock/" in first.headers["authorization"]
    assert "/us-east-1/bedrock/" in second.headers["authorization"]
    assert resigned(first, "AKID", "s", None, "eu-west-1") == first.headers["authorization"]


async def test_credentials_given_to_the_call_are_used_over_a_bearer_token() -> None:
    class Frozen:
        access_key = "AKIDGIVEN"
        secret_key = "given-secret"
        token = None

    server = Server(answer(recording("synthetic-text")))
    await ask(server, api_key="ignored-token", credentials=Frozen())
    request = server.requests[0]
    assert "Credential=AKIDGIVEN/" in request.headers["authorization"]
    assert "x-amz-security-token" not in request.headers
    assert resigned(request, "AKIDGIVEN", "given-secret", None, "us-east-1") == request.headers["authorization"]


def test_wrong_arguments_raise_at_the_call() -> None:
    with pytest.raises(TypeError, match="credentials must be botocore credentials"):
        stream_bedrock(bedrock(), context(), options(), credentials=("AKID", "s"))
    with pytest.raises(TypeError, match="region must be a str or None, got int"):
        stream_bedrock(bedrock(), context(), options(), region=1)  # type: ignore[arg-type]


async def test_no_credentials_is_one_error_event_saying_what_to_set() -> None:
    server = Server()
    _, final = await ask(server, api_key=None)
    assert server.requests == []
    assert final.stop_reason == "error"
    assert "No AWS credentials for Amazon Bedrock: set AWS_ACCESS_KEY_ID" in (final.error_message or "")


async def test_skip_auth_signs_with_dummy_keys_for_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEDROCK_SKIP_AUTH", "1")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "not-used")
    server = Server(answer(recording("synthetic-text")))
    await ask(server, api_key=None)
    assert "Credential=dummy-access-key/" in server.requests[0].headers["authorization"]


async def test_custom_headers_are_sent_and_signed_but_never_replace_the_authentication() -> None:
    server = Server(answer(recording("synthetic-text")))
    model = bedrock(headers={"X-Team": "agents", "Authorization": "Bearer nope", "X-Amz-Date": "never"})
    await ask(server, model, api_key=None, credentials=Credentials("AKID", "s"), headers={"x-trace": "1"})
    request = server.requests[0]
    assert request.headers["x-team"] == "agents" and request.headers["x-trace"] == "1"
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert request.headers["x-amz-date"] != "never"
    assert "SignedHeaders=content-type;host;x-amz-date;x-team;x-trace," in request.headers["authorization"]
    assert resigned(request, "AKID", "s", None, "us-east-1") == request.headers["authorization"]


async def test_an_abort_while_credentials_resolve_ends_the_stream_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()

    def slow_resolve(*args: Any) -> Any:  # a metadata service that does not answer
        started.set()
        release.wait(30)
        raise RuntimeError("released")

    async def abort_once_started() -> None:
        await anyio.to_thread.run_sync(started.wait)
        opts.signal.abort()

    monkeypatch.setattr(_bedrock, "_resolve", slow_resolve)
    opts = options(api_key=None)
    stream = stream_bedrock(bedrock(), context(), opts, http=FAST)
    try:
        with anyio.fail_after(30):
            async with stream, anyio.create_task_group() as tg:
                tg.start_soon(abort_once_started)
                events = [event async for event in stream]
        assert not release.is_set()  # the thread still waits: the stream did not
        (event,) = events
        assert isinstance(event, ErrorEvent) and event.reason == "aborted"
    finally:
        release.set()


def test_importing_the_providers_loads_no_botocore() -> None:
    code = "import sys, agentloop.providers\nprint([m for m in sys.modules if m.startswith('botocore')])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the event stream ------------------------------------------------------------------------


async def test_every_cut_of_the_body_into_chunks_gives_the_same_events() -> None:
    body = recording("synthetic-tools")
    server = Server(*(answer(split(body, size)) for size in (1, 7, 64, len(body))))
    results = [await ask(server) for _ in range(4)]
    expected = [(e.type, getattr(e, "delta", None)) for e in results[-1][0]]
    assert types(results[-1][0])[-1] == "done"
    for events, _ in results:
        assert [(e.type, getattr(e, "delta", None)) for e in events] == expected
    final = results[0][1]
    assert [c.arguments for c in final.content if isinstance(c, ToolCall)] == [
        {"location": "Paris", "note": 'a\u00e9b"c', "unit": "celsius"},
        {"location": "Lyon"},
    ]


async def test_a_message_larger_than_max_event_size_ends_the_stream() -> None:
    server = Server(answer(recording("synthetic-text")))
    _, final = await ask(server, http=HTTPOptions(max_event_size=100, max_retries=0))
    assert final.stop_reason == "error"
    assert final.error_message == "The server sent an event stream message larger than max_event_size (100 bytes)"


async def test_a_body_larger_than_max_body_size_ends_the_stream_with_its_content_so_far() -> None:
    server = Server(answer(split(recording("synthetic-tools"), 100)))
    _, final = await ask(server, http=HTTPOptions(max_body_size=700, max_retries=0))
    assert final.stop_reason == "error"
    assert final.error_message == "The response body is larger than max_body_size (700 bytes)"
    assert final.text == "Checking."


async def test_a_corrupted_message_is_a_malformed_event_stream() -> None:
    body = bytearray(recording("synthetic-text"))
    body[200] ^= 0x01  # inside the second message's payload: its CRC no longer matches
    server = Server(answer(bytes(body)))
    _, final = await ask(server)
    assert final.stop_reason == "error"
    assert (final.error_message or "").startswith("Malformed event stream: ChecksumMismatch: ")


async def test_an_answer_that_is_not_an_event_stream_is_an_error() -> None:
    server = Server(httpx.Response(200, json={"output": {}}))
    _, final = await ask(server)
    assert final.error_message == (
        "Expected an event stream (application/vnd.amazon.eventstream) from "
        f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{QUOTED}/converse-stream, "
        "got 'application/json': {\"output\":{}}"
    )


@pytest.mark.parametrize(
    ("status", "kind", "message", "text"),
    [
        (400, "ValidationException", "Input is too long for requested model.", "Validation error: Input is too long"),
        (
            400,
            "ValidationException",
            "data retention mode 'default' is not available for this model",
            "Validation error: data retention mode 'default' is not available for this model See https://docs.aws.",
        ),
        (404, "ResourceNotFoundException", "Model not found", "ResourceNotFoundException: Model not found"),
        (424, "ModelErrorException", "The model failed", "ModelErrorException: The model failed"),
        (502, "", "Bad gateway", "HTTP 502: Bad gateway"),
    ],
)
async def test_http_errors_are_named_by_their_aws_error_type(status: int, kind: str, message: str, text: str) -> None:
    headers = {"x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"} if kind else {}
    server = Server(httpx.Response(status, headers=headers, json={"message": message}))
    _, final = await ask(server, http=HTTPOptions(max_retries=0))
    assert (final.error_message or "").startswith(text)


async def test_a_retryable_exception_before_any_content_is_retried() -> None:
    server = Server(answer(recording("synthetic-model-stream-error")), answer(recording("synthetic-text")))
    events, final = await ask(server)
    assert len(server.requests) == 2
    assert final.stop_reason == "stop" and final.text == "Hello, world! \u00e9\U0001f600"
    assert types(events).count("start") == 1


async def test_an_exception_after_content_ends_the_stream_with_the_content_kept() -> None:
    server = Server(answer(recording("synthetic-throttled-midstream")), answer(recording("synthetic-text")))
    _, final = await ask(server)
    assert len(server.requests) == 1
    assert final.text == "Partial answer"
    assert final.error_message == "Throttling error: Too many tokens, please wait before trying again."


async def test_a_validation_exception_is_not_retried() -> None:
    server = Server(answer(recording("synthetic-validation-exception")), answer(recording("synthetic-text")))
    _, final = await ask(server)
    assert len(server.requests) == 1
    assert final.error_message == "Validation error: Input is too long for requested model."


async def test_an_abort_mid_stream_ends_with_aborted_and_the_content_so_far() -> None:
    body = recording("synthetic-text")
    head = first_messages(body, 2)  # messageStart and the first text delta
    never = anyio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield head
        await never.wait()  # the rest never comes
        yield body[len(head) :]

    opts = options()
    server = Server(answer(slow()))
    async with server.client() as client:
        stream = stream_bedrock(bedrock(), context(), opts, http=FAST, client=client)
        events = []
        with anyio.fail_after(30):
            async with stream:
                async for event in stream:
                    events.append(event)
                    if event.type == "text_delta":
                        opts.signal.abort()
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.reason == "aborted" and last.error.text == "Hello"


async def test_a_stalled_stream_ends_after_event_timeout() -> None:
    never = anyio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield first_messages(recording("synthetic-text"), 2)
        await never.wait()
        yield b""

    server = Server(answer(stalled()))
    _, final = await ask(server, http=HTTPOptions(event_timeout=0.2, max_retries=0))
    assert final.text == "Hello"
    assert (final.error_message or "").startswith("The server sent no event for 0.2 s (event_timeout")


# --- what the events say -----------------------------------------------------------------------


async def test_signed_reasoning_keeps_its_signature_and_usage_its_cost() -> None:
    model = get_model("amazon-bedrock", CLAUDE)
    server = Server(answer(recording("synthetic-reasoning-signed")))
    events, final = await ask(server, model)
    thinking, text = final.content
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "The user greets. Answer briefly."
    assert thinking.thinking_signature == "EqoBCkgIARABGAIiQL0sig-tail=="
    assert text.text == "Hi there."
    usage = final.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens) == (
        40,
        30,
        0,
        2048,
        2118,
    )
    cost = model.cost
    expected = (40 * cost.input + 30 * cost.output + 2048 * cost.cache_write) / 1e6
    assert usage.cost.total == pytest.approx(expected)
    assert types(events) == ["start", *streamed("thinking", 2), *streamed("text", 1), "done"]


async def test_redacted_reasoning_keeps_its_bytes_as_base64() -> None:
    server = Server(answer(recording("synthetic-reasoning-redacted")))
    _, final = await ask(server)
    thinking = final.content[0]
    assert isinstance(thinking, ThinkingContent) and thinking.redacted
    assert thinking.thinking == "[Reasoning redacted]"
    import base64

    assert base64.b64decode(thinking.thinking_signature or "") == b"\x00\x01encrypted-part-one-part-two\xff"


async def test_a_tool_call_cut_by_max_tokens_keeps_its_partial_arguments() -> None:
    server = Server(answer(recording("synthetic-max-tokens")))
    events, final = await ask(server)
    assert final.stop_reason == "length"
    call = final.content[1]
    assert isinstance(call, ToolCall) and call.arguments == {"path": "a.txt", "content": "abc"}
    assert "toolcall_end" not in types(events)


async def test_the_stop_reasons_map_as_pi_ai_maps_them() -> None:
    expected = {
        "synthetic-text": ("stop", None),
        "synthetic-stop-sequence": ("stop", None),
        "synthetic-tools": ("toolUse", None),
        "synthetic-context-window": ("length", None),
        "synthetic-guardrail": ("error", "Provider stopped with: guardrail_intervened"),
        "synthetic-content-filtered": ("error", "Provider stopped with: content_filtered"),
        "synthetic-no-stop-reason": ("error", "An unknown error occurred"),
    }
    for name, (reason, text) in expected.items():
        _, final = await ask(Server(answer(recording(name))))
        assert (final.stop_reason, final.error_message) == (reason, text), name


# --- the registry ----------------------------------------------------------------------------


def test_the_registry_lists_pi_ais_bedrock_models() -> None:
    models = get_models("amazon-bedrock")
    assert len(models) == 208
    assert {m.api for m in models} == {"bedrock-converse-stream"}
    assert {urlsplit(m.base_url).hostname for m in models} == {
        "bedrock-runtime.us-east-1.amazonaws.com",
        "bedrock-runtime.eu-central-1.amazonaws.com",
    }
    opus = get_model("amazon-bedrock", "global.anthropic.claude-opus-4-7")
    assert (opus.name, opus.context_window, opus.max_tokens, opus.input) == (
        "Claude Opus 4.7 (Global)",
        1_000_000,
        128_000,
        ("text", "image"),
    )
    assert opus.cost == ModelCost(input=5, output=25, cache_read=0.5, cache_write=6.25)
    assert opus.compat == {"thinking_level_map": {"xhigh": "xhigh", "max": "max"}}
    micro = get_model("amazon-bedrock", "eu.amazon.nova-micro-v1:0")
    assert (micro.reasoning, micro.input, micro.base_url) == (
        False,
        ("text",),
        "https://bedrock-runtime.eu-central-1.amazonaws.com",
    )


async def test_an_agent_runs_a_turn_on_bedrock_through_the_default_stream_function() -> None:
    server = Server(answer(recording("synthetic-text")))
    async with server.client() as client:

        def stream_fn(model: Model, ctx: Context, opts: Any) -> Any:
            return stream_simple(model, ctx, opts, http=FAST, client=client)

        agent = Agent(
            model=get_model("amazon-bedrock", CLAUDE),
            stream_fn=stream_fn,
            get_api_key=lambda provider: "token" if provider == "amazon-bedrock" else None,
        )
        with anyio.fail_after(30):
            await agent.prompt("hello")
    reply = agent.state.messages[-1]
    assert getattr(reply, "text", None) == "Hello, world! \u00e9\U0001f600"
    assert server.requests[0].headers["authorization"] == "Bearer token"
    sent = server.bodies[0]
    assert sent["messages"][-1]["content"][-1] == {"cachePoint": {"type": "default"}}
