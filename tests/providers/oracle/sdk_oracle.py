"""What the official SDKs make of the recorded Azure and Mistral streams: the oracle fixture
`sdk_oracle.json` that `test_azure.py` and `test_mistral.py` compare agentloop's final messages to.

Run in a scratch virtualenv with the SDKs (not in the project's environment):

    python3 -m venv /tmp/oracle-venv && /tmp/oracle-venv/bin/pip install openai mistralai
    /tmp/oracle-venv/bin/python tests/providers/oracle/sdk_oracle.py   # writes sdk_oracle.json

Each `pi_wire/recordings/*.azure.sse` is served (httpx2.MockTransport) to openai's `AzureOpenAI`
client, read with `client.responses.create(..., stream=True)`: the final response is the one its
terminal event (`response.completed`, `.incomplete` or `.failed`) carries, as the SDK types it; each `*.mistral.sse` to
mistralai's `Mistral` client, read with `client.chat.stream(...)`, whose typed chunks are added up
as Mistral documents them (text and thinking in order, tool calls by index, the last finish reason
and usage). A stream the SDK refuses is recorded with the SDK's error. The requests the clients
made (path, query, auth header) are recorded too.
"""

from __future__ import annotations

import importlib
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

# Imported by name: the SDKs are in the scratch virtualenv only, not in the project's environment.
httpx2: Any = importlib.import_module("httpx2")
Mistral: Any = importlib.import_module("mistralai.client").Mistral
AzureOpenAI: Any = importlib.import_module("openai").AzureOpenAI

HERE = Path(__file__).parent
RECORDINGS = HERE.parent / "pi_wire" / "recordings"
OUT = HERE / "sdk_oracle.json"


def transport(body: bytes, seen: list[Any]) -> Any:
    def answer(request: Any) -> Any:
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.MockTransport(answer)


def parsed(arguments: str) -> Any:
    """Tool-call arguments as JSON, or the raw text when they are not JSON (a call cut short)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return {"unparsed": arguments}


def request_of(request: Any, *headers: str) -> dict[str, Any]:
    return {
        "path": request.url.path,
        "query": request.url.query.decode() if isinstance(request.url.query, bytes) else str(request.url.query),
        **{name: request.headers.get(name) for name in headers},
    }


def azure(body: bytes, **auth: Any) -> dict[str, Any]:
    seen: list[Any] = []
    client = AzureOpenAI(
        base_url="http://oracle/openai/v1",
        api_version="v1",
        http_client=httpx2.Client(transport=transport(body, seen)),
        max_retries=0,
        **auth,
    )
    out: dict[str, Any] = {}
    response = None
    try:
        with client.responses.create(model="my-deployment", input="hello", stream=True) as events:
            for event in events:
                if event.type in ("response.completed", "response.incomplete", "response.failed"):
                    response = event.response
    except Exception as exc:  # the SDK refuses the stream: that is the oracle's answer
        out["error"] = type(exc).__name__
    if response is None:
        out.setdefault("error", "no terminal response event")
    else:
        text, thinking, calls = [], [], []
        for item in response.output:
            if item.type == "message":
                text += [part.text if part.type == "output_text" else part.refusal for part in item.content]
            elif item.type == "reasoning":
                parts = [s.text for s in item.summary] or [c.text for c in item.content or []]
                thinking.append("\n\n".join(parts) if item.summary else "".join(parts))
            elif item.type == "function_call":
                calls.append(
                    {"id": f"{item.call_id}|{item.id}", "name": item.name, "arguments": parsed(item.arguments)}
                )
        usage = response.usage
        out.update(
            text="".join(text),
            thinking=thinking,
            tool_calls=calls,
            status=response.status,
            incomplete_reason=response.incomplete_details.reason if response.incomplete_details else None,
            usage=None
            if usage is None
            else {
                "input": usage.input_tokens,
                "cached": usage.input_tokens_details.cached_tokens if usage.input_tokens_details else 0,
                "output": usage.output_tokens,
            },
        )
    out["request"] = request_of(seen[0], "api-key", "authorization")
    return out


def mistral(body: bytes) -> dict[str, Any]:
    seen: list[Any] = []
    client = Mistral(
        api_key="mistral-key", server_url="http://oracle", client=httpx2.Client(transport=transport(body, seen))
    )
    blocks: list[list[str]] = []  # [kind, text]
    calls: dict[Any, dict[str, Any]] = {}
    finish = None
    usage = None
    out: dict[str, Any] = {}
    try:
        for event in client.chat.stream(
            model="magistral-medium-latest", messages=[{"role": "user", "content": "hello"}]
        ):
            data = event.data
            if data.usage is not None:
                usage = {
                    "prompt": data.usage.prompt_tokens,
                    "completion": data.usage.completion_tokens,
                    "total": data.usage.total_tokens,
                }
                details = (data.usage.additional_properties or {}).get("prompt_tokens_details")
                usage["cached"] = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
            if not data.choices:
                continue
            choice = data.choices[0]
            if choice.finish_reason:
                finish = choice.finish_reason
            content = choice.delta.content
            for chunk in [content] if isinstance(content, str) else content or []:
                if isinstance(chunk, str):
                    kind, text = "text", chunk
                elif chunk.type == "thinking":
                    kind, text = "thinking", "".join(getattr(t, "text", "") or "" for t in chunk.thinking)
                elif chunk.type == "text":
                    kind, text = "text", chunk.text
                else:
                    continue
                if text:
                    if blocks and blocks[-1][0] == kind:
                        blocks[-1][1] += text
                    else:
                        blocks.append([kind, text])
            for call in choice.delta.tool_calls or []:
                arguments = call.function.arguments
                piece = arguments if isinstance(arguments, str) else json.dumps(arguments, separators=(",", ":"))
                key = call.index if call.index is not None else call.id
                if key in calls:
                    calls[key]["arguments"] += piece
                else:
                    calls[key] = {"id": call.id, "name": call.function.name, "arguments": piece}
                    blocks.append(["toolCall", str(key)])
    except Exception as exc:
        out["error"] = type(exc).__name__
    final: list[dict[str, Any]] = []
    for kind, text in blocks:
        if kind == "toolCall":
            call = calls[int(text) if text.isdigit() else text]
            final.append(
                {"type": "toolCall", "id": call["id"], "name": call["name"], "arguments": parsed(call["arguments"])}
            )
        else:
            final.append({"type": kind, "text": text})
    out.update(content=final, finish_reason=finish, usage=usage)
    out["request"] = request_of(seen[0], "authorization")
    return out


def main() -> None:
    results: dict[str, Any] = {"sdks": {"openai": version("openai"), "mistralai": version("mistralai")}}
    for path in sorted(RECORDINGS.glob("*.azure.sse")):
        results[path.name] = azure(path.read_bytes(), api_key="azure-key")
    first = sorted(RECORDINGS.glob("*.azure.sse"))[0]
    results["entra-token-request"] = azure(first.read_bytes(), azure_ad_token_provider=lambda: "entra-token")["request"]
    for path in sorted(RECORDINGS.glob("*.mistral.sse")):
        results[path.name] = mistral(path.read_bytes())
    OUT.write_text(json.dumps(results, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(results) - 2} streams -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
