"""The requests pi-ai's own providers send for a call (`pi_wire/pi_requests.mjs` on loopback), to
compare with the requests agentloop's providers build for the same call."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from agentloop import AbortSignal, Context, Model, StreamOptions
from agentloop.providers._request import Request
from agentloop.wire import to_json

SCRIPT = Path(__file__).parent / "pi_wire" / "pi_requests.mjs"


@dataclass(frozen=True)
class Call:
    """One call: what both implementations are given."""

    id: str
    model: Model
    context: Context
    options: dict[str, Any] = field(default_factory=dict)
    """pi-ai's option names (`apiKey`, `reasoning`, `sessionId`, `maxTokens`, ...)."""


def model_json(model: Model) -> dict[str, Any]:
    """`model` as pi-ai's JSON (its base URL's path becomes a path on the capture server)."""
    data: dict[str, Any] = {
        "id": model.id,
        "name": model.name or model.id,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": httpx.URL(model.base_url).path.rstrip("/") if model.base_url else "",
        "reasoning": model.reasoning,
        "input": list(model.input),
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 0,
        "maxTokens": model.max_tokens,
    }
    levels = (model.compat or {}).get("thinking_level_map")
    if levels is not None:
        data["thinkingLevelMap"] = dict(levels)
    if model.headers:
        data["headers"] = dict(model.headers)
    return data


def context_json(context: Context) -> dict[str, Any]:
    return {
        "systemPrompt": context.system_prompt,
        "messages": [to_json(m) for m in context.messages],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in context.tools],
    }


async def pi_requests(calls: list[Call], node_modules: Path) -> dict[str, dict[str, Any]]:
    """What pi-ai sent for each call: `method`, `path` (with the query), `headers`, `body`."""
    cases = [
        {
            "id": c.id,
            "api": c.model.api,
            "model": model_json(c.model),
            "context": context_json(c.context),
            "options": c.options,
        }
        for c in calls
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_OPENAI_", "MISTRAL_"))}
    done = await anyio.run_process(
        ["node", str(SCRIPT)],
        input=json.dumps(cases).encode(),
        env={**env, "NODE_PATH": str(node_modules)},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line]
    assert len(lines) == len(calls), done.stderr.decode()
    return {line["id"]: line for line in lines}


def our_request(
    call: Call, build: Callable[[Model, Context, StreamOptions], Request]
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The request one of our providers builds for `call` (pi-ai's options as ours): its path
    with the query, its headers (names in lower case) and its body as JSON."""
    o = call.options
    options = StreamOptions(
        signal=AbortSignal(),
        api_key=o["apiKey"],
        reasoning=o.get("reasoning"),
        session_id=o.get("sessionId"),
        temperature=o.get("temperature"),
        max_tokens=o.get("maxTokens"),
    )
    request = build(call.model, call.context, options)
    headers = {k.lower(): v for k, v in request.headers.items()}
    return httpx.URL(request.url).raw_path.decode(), headers, json.loads(json.dumps(request.body))


async def same_path_and_body_as_pi(
    calls: list[Call], node_modules: Path, build: Callable[[Model, Context, StreamOptions], Request]
) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """Each call's request as ours builds it (`build`) and as pi-ai sends it: the paths (with the
    query) and the bodies must be the same. For each call: its id, our headers and pi-ai's."""
    with anyio.fail_after(120):
        theirs = await pi_requests(calls, node_modules)
    out = []
    for call in calls:
        path, headers, body = our_request(call, build)
        reference = theirs[call.id]
        assert (path, body) == (reference["path"], reference["body"]), call.id
        out.append((call.id, headers, reference["headers"]))
    return out
