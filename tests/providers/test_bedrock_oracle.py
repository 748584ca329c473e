"""agentloop's Bedrock requests and readings against two oracles: boto3 (its findings recorded in
`bedrock_wire/boto3.json` by `boto3_oracle.py`) and pi-ai's own Bedrock provider (run live).

* requests: boto3 validated every body of `request_cases.py` against the Bedrock model and
  serialized it to the same JSON and URL path; pi-ai builds the same `commandInput` for the same
  case, except where agentloop differs on purpose (`REQUEST_KEPT`).
* signature: agentloop's signer gives boto3's `Authorization` for the same request and time.
* streams: what boto3's `converse_stream` makes of each recording is what agentloop's final
  message says (text, reasoning and its signature or redacted bytes, tool calls, stop reason,
  usage, the error).
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from agentloop import AbortSignal, Context, Model, StreamOptions, TextContent, ThinkingContent, ToolCall, UserMessage
from agentloop.providers import HTTPOptions, stream_bedrock
from agentloop.providers._bedrock import _Frozen, _SigV4
from agentloop.providers._bedrock_stream import bedrock_error_text, map_stop_reason

from .bedrock_wire.request_cases import CASES, pi_case
from .conftest import PI_AI

HERE = Path(__file__).parent / "bedrock_wire"
BOTO3 = json.loads((HERE / "boto3.json").read_text())
EVENT_STREAM = "application/vnd.amazon.eventstream"


def _context_window_fit(ours: dict[str, Any]) -> dict[str, Any]:
    ours = json.loads(json.dumps(ours))
    ours["inferenceConfig"]["maxTokens"] = 131072 - 1 - 4096  # pi-ai's fit: window - estimated input - margin
    return ours


REQUEST_KEPT: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "gpt-oss": (
        "maxTokens: pi-ai 1.6.1 fits it into the context window from an estimate of the input "
        "(clampMaxTokensToContext, every provider); agentloop's providers send the model's max_tokens",
        _context_window_fit,
    ),
}
"""Cases where our body differs from pi-ai's on purpose: the reason, and the change that makes
ours pi-ai's (so that nothing else may differ)."""


# --- requests --------------------------------------------------------------------------------


def test_boto3_validated_every_body_and_serialized_it_as_we_do() -> None:
    found = BOTO3["requests"]
    assert set(found) == set(CASES)
    for name, case in CASES.items():
        assert found[name]["valid"], (name, found[name])
        assert found[name]["body"] == case.body(), name
        path = urlsplit(found[name]["url"]).path
        assert path == f"/model/{case.model.id.replace(':', '%3A').replace('/', '%2F')}/converse-stream", name


async def test_the_url_path_we_send_is_boto3s(anyio_backend: object) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(400, json={"message": "stop here"})

    for name, case in CASES.items():
        sent.clear()
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            opts = StreamOptions(signal=AbortSignal(), api_key="token")
            http = HTTPOptions(max_retries=0)
            await stream_bedrock(case.model, case.context, opts, http=http, client=client).result()
        assert sent[0].url.raw_path.decode() == urlsplit(BOTO3["requests"][name]["url"]).path, name


def test_our_signature_of_boto3s_request_is_boto3s() -> None:
    signed = BOTO3["signature"]
    request = httpx.Request(
        "POST", signed["url"], content=signed["body"].encode(), headers={"content-type": "application/json"}
    )
    signer = _SigV4(_Frozen("AKIDEXAMPLE", "secret/key+example", "session-token"), "us-east-1")
    with mock.patch("botocore.auth.get_current_datetime", return_value=datetime.datetime(2026, 1, 2, 3, 4, 5)):
        next(signer.auth_flow(request))
    assert request.headers["authorization"] == signed["headers"]["Authorization"]
    assert request.headers["x-amz-date"] == signed["headers"]["X-Amz-Date"]
    assert request.headers["x-amz-security-token"] == signed["headers"]["X-Amz-Security-Token"]


async def test_our_bodies_are_pi_ais_except_where_kept(anyio_backend: object, pi_node_modules: Path) -> None:
    cases = json.dumps({name: pi_case(case) for name, case in CASES.items()}).encode()
    with anyio.fail_after(120):
        done = await anyio.run_process(
            ["node", str(HERE / "pi_requests.mjs")],
            input=cases,
            env={**os.environ, "PI_AI": PI_AI, "NODE_PATH": str(pi_node_modules)},
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    theirs = json.loads(done.stdout)
    assert set(theirs) == set(CASES)
    for name, case in CASES.items():
        ours = case.body()
        if name in REQUEST_KEPT:
            assert ours != theirs[name], f"{name} agrees with pi-ai now: drop it from REQUEST_KEPT"
            ours = REQUEST_KEPT[name][1](ours)
        assert ours == theirs[name], name


# --- streams ---------------------------------------------------------------------------------


async def read(body: bytes) -> Any:
    model = Model(id="replay", api="bedrock-converse-stream", provider="replay", base_url="http://replay")
    transport = httpx.MockTransport(lambda _: httpx.Response(200, headers={"content-type": EVENT_STREAM}, content=body))
    async with httpx.AsyncClient(transport=transport) as client:
        opts = StreamOptions(signal=AbortSignal(), api_key="bedrock-oracle-9f3")
        context = Context(messages=[UserMessage(content="hi")])
        return await stream_bedrock(model, context, opts, http=HTTPOptions(max_retries=0), client=client).result()


def _ends_inside_a_message(body: bytes) -> bool:
    from botocore.eventstream import EventStreamBuffer

    decoder = EventStreamBuffer()
    decoder.add_data(body)
    read: int = sum(message.prelude.total_length for message in decoder)
    return read < len(body)


def _blocks_agree(theirs: list[dict[str, Any]], ours: tuple[Any, ...]) -> None:
    assert len(theirs) == len(ours)
    for block, mine in zip(theirs, ours, strict=True):
        if block["type"] == "text":
            assert isinstance(mine, TextContent) and mine.text == block["text"]
        elif block["type"] == "reasoning":
            assert isinstance(mine, ThinkingContent)
            if block["redacted"]:
                assert mine.redacted and mine.thinking_signature == block["redacted"]
                assert mine.thinking.replace("[Reasoning redacted]", "") == block["text"]
            else:
                assert not mine.redacted and mine.thinking == block["text"]
                assert mine.thinking_signature == block["signature"]
        else:
            assert isinstance(mine, ToolCall) and (mine.id, mine.name) == (block["id"], block["name"])
            try:
                arguments = json.loads(block["input"] or "{}")
            except ValueError:
                continue  # cut short: agentloop keeps what it could parse (test_bedrock.py)
            assert mine.arguments == arguments


@pytest.mark.parametrize("name", sorted(BOTO3["streams"]))
async def test_each_stream_adds_up_to_what_boto3_reads(name: str) -> None:
    found = BOTO3["streams"][name]
    body = (HERE / "recordings" / f"{name}.eventstream").read_bytes()
    final = await read(body)
    error = found.get("error")
    if error is not None and error["code"] == "ResponseParserError":
        # aimock opens text blocks with an empty `contentBlockStart`, which Bedrock never sends:
        # boto3 refuses it, pi-ai and agentloop skip it
        assert "ContentBlockStart must have one and only one member set" in error["message"]
        assert name.startswith("aimock-") and final.content
        return
    if name == "synthetic-user-role":  # boto3 does not look at the role; pi-ai and agentloop fail
        assert final.error_message == "Unexpected assistant message start but got user message start instead"
        return
    _blocks_agree(found["blocks"], final.content)
    if _ends_inside_a_message(body):  # boto3 drops the cut message quietly; agentloop reports it
        assert final.error_message == (
            "The event stream ended inside a message: the connection closed early and the response is incomplete."
        )
        return
    if error is not None:
        assert final.stop_reason == "error"
        code = error["code"]
        if code.endswith("Exception"):  # modelled: Bedrock's error type and its message
            kind = code[:1].upper() + code[1:]
            assert final.error_message == bedrock_error_text(kind, error["message"] or "Unknown")
        elif code:  # an unmodelled error: its own message
            assert final.error_message == error["message"]
        return
    usage = found.get("usage")
    if usage is not None:
        mine = final.usage
        assert (mine.input, mine.output) == (usage["inputTokens"], usage["outputTokens"])
        assert (mine.cache_read, mine.cache_write) == (
            usage.get("cacheReadInputTokens", 0),
            usage.get("cacheWriteInputTokens", 0),
        )
        assert mine.total_tokens == usage.get("totalTokens") or usage["inputTokens"] + usage["outputTokens"]
    stop = found.get("stopReason")
    if stop is None and "messageStop" in found["events"]:
        assert (final.stop_reason, final.error_message) == ("error", "An unknown error occurred")
    elif stop is None:  # boto3 stops quietly at a cut stream; agentloop reports it
        assert final.stop_reason == "error" and "messageStop" in (final.error_message or "")
    elif map_stop_reason(stop) == "error":
        assert (final.stop_reason, final.error_message) == ("error", f"Provider stopped with: {stop}")
    else:
        assert final.stop_reason == map_stop_reason(stop)


def test_the_oracle_covers_every_recording() -> None:
    recordings = {path.stem for path in (HERE / "recordings").glob("*.eventstream")}
    assert set(BOTO3["streams"]) == recordings
    read_by_boto3 = [n for n, s in BOTO3["streams"].items() if s.get("error", {}).get("code") != "ResponseParserError"]
    assert len(read_by_boto3) >= 28
    assert BOTO3["requests"] and all(r["valid"] for r in BOTO3["requests"].values())
