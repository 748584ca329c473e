"""The request bodies of pi-ai 1.6.1's Google providers for a set of contexts, kept in
`pi_requests.json` (read by `test_google_wire.py`, which builds agentloop's for the same cases).

    npm install --prefix /tmp/pi @earendil-works/pi-ai@1.6.1
    NODE_PATH=/tmp/pi/node_modules python -m tests.providers.google_wire.pi_requests

The cases: thinking levels and budgets on every kind of model (2.5 budgets, Gemini 3 and 4 levels,
Gemma 4's map, clamping), tools with `const`, and a replayed conversation (images, thought
signatures on thinking, text and calls, parallel calls, tool results with images and errors, a
call from another provider) on Gemini 3 (call ids, images inside the function response) and
Gemini 2.5 (no ids, images in a turn of their own), on the Gemini API and on Vertex AI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import agentloop as al
from agentloop.wire import to_json

HERE = Path(__file__).parent
OUT = HERE / "pi_requests.json"


class Tool:
    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters


WEATHER = Tool(
    "get_weather",
    "Get the weather",
    {
        "type": "object",
        "properties": {
            "location": {"type": "string"},
            "unit": {"const": "c"},
            "n": {"anyOf": [{"const": 1}, {"type": "null"}]},
        },
        "required": ["location"],
        "$defs": {"x": {"const": "y"}},
    },
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
SIGNATURE = "c2lnbmF0dXJlLTE="


def conversation(provider: str, model_id: str, api: str) -> list[al.Message]:
    ours = al.AssistantMessage(
        content=(
            al.ThinkingContent("I think", thinking_signature=SIGNATURE),
            al.TextContent("Let me check.", text_signature=SIGNATURE),
            al.ToolCall("call|1", "get_weather", {"location": "Paris"}, thought_signature=SIGNATURE),
            al.ToolCall("c2", "get_weather", {"location": "Rome"}),
        ),
        api=api,
        provider=provider,
        model=model_id,
        stop_reason="toolUse",
        timestamp=1,
    )
    other = al.AssistantMessage(
        content=(al.TextContent("from claude"), al.ToolCall("toolu_1", "get_weather", {"location": "Oslo"})),
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason="toolUse",
        timestamp=1,
    )
    image = al.ImageContent(data=PNG, mime_type="image/png")
    return [
        al.UserMessage(content=(al.TextContent("look"), image), timestamp=0),
        ours,
        al.ToolResultMessage(
            tool_call_id="call|1", tool_name="get_weather", content=(al.TextContent("sunny"),), timestamp=2
        ),
        al.ToolResultMessage(tool_call_id="c2", tool_name="get_weather", content=(image,), is_error=True, timestamp=3),
        al.UserMessage(content="and Oslo?", timestamp=4),
        other,
        al.ToolResultMessage(
            tool_call_id="toolu_1", tool_name="get_weather", content=(al.TextContent("cold"), image), timestamp=5
        ),
        al.AssistantMessage(
            content=(al.TextContent("", text_signature=SIGNATURE),),
            api=api,
            provider=provider,
            model=model_id,
            timestamp=6,
        ),
        al.UserMessage(content="", timestamp=7),
    ]


def cases() -> list[tuple[str, str, str, al.Context, dict[str, Any]]]:
    """(id, provider, model id, context, StreamOptions keywords) of every case."""
    hi: list[al.Message] = [al.UserMessage(content="hi", timestamp=0)]
    out: list[tuple[str, str, str, al.Context, dict[str, Any]]] = []

    def add(
        case: str,
        provider: str,
        model_id: str,
        messages: list[al.Message],
        system: str = "",
        tools: Any = (),
        **options: Any,
    ) -> None:
        out.append(
            (case, provider, model_id, al.Context(system_prompt=system, messages=messages, tools=list(tools)), options)
        )

    add("flash-medium", "google", "gemini-2.5-flash", hi, "Be terse.", [WEATHER], reasoning="medium", temperature=0.5)
    add("flash-off", "google", "gemini-2.5-flash", hi)
    add("flash-xhigh", "google", "gemini-2.5-flash", hi, reasoning="xhigh")
    add("pro-budgets", "google", "gemini-2.5-pro", hi, reasoning="low", thinking_budgets={"low": 999})
    add("lite-minimal", "google", "gemini-2.5-flash-lite", hi, reasoning="minimal", max_tokens=100)
    add("g3-off", "google", "gemini-3-flash-preview", hi, tools=[WEATHER])
    add("g3-high", "google", "gemini-3-flash-preview", hi, reasoning="high")
    add("g3-max", "google", "gemini-3-flash-preview", hi, reasoning="max")
    add("g31pro-off", "google", "gemini-3.1-pro-preview", hi)
    add("g31pro-minimal", "google", "gemini-3.1-pro-preview", hi, reasoning="minimal")
    add("g4-xhigh", "google", "gemini-4-hydrogen", hi, reasoning="xhigh")
    add("g4-max", "google", "gemini-4-neon", hi, reasoning="max")
    add("gemma-low", "google", "gemma-4-31b-it", hi, reasoning="low")
    add("gemma-off", "google", "gemma-4-31b-it", hi)
    add("deep-medium", "google", "deep-research-preview-04-2026", hi, reasoning="medium")
    g3 = conversation("google", "gemini-3-flash-preview", "google-generative-ai")
    add("g3-conversation", "google", "gemini-3-flash-preview", g3, "sys", [WEATHER], reasoning="low")
    g25 = conversation("google", "gemini-2.5-flash", "google-generative-ai")
    add("g25-conversation", "google", "gemini-2.5-flash", g25, "sys", [WEATHER])
    vx = conversation("google-vertex", "gemini-3-flash-preview", "google-vertex")
    add("vertex-g3-conversation", "google-vertex", "gemini-3-flash-preview", vx, "sys", [WEATHER], reasoning="medium")
    add("vertex-g25-high", "google-vertex", "gemini-2.5-pro", hi, reasoning="high")
    return out


def pi_case(case: str, provider: str, model_id: str, context: al.Context, options: dict[str, Any]) -> dict[str, Any]:
    """A case as pi_capture.mjs takes it (pi's JSON)."""
    pi_context: dict[str, Any] = {
        "messages": [to_json(m) for m in context.messages],
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in context.tools],
    }
    if context.system_prompt:
        pi_context["systemPrompt"] = context.system_prompt
    names = {"reasoning": "reasoning", "temperature": "temperature", "max_tokens": "maxTokens"}
    pi_options = {names[k]: v for k, v in options.items() if k in names}
    if "thinking_budgets" in options:
        pi_options["thinkingBudgets"] = options["thinking_budgets"]
    api = "google-vertex" if provider == "google-vertex" else "google-generative-ai"
    return {
        "id": case,
        "api": api,
        "model": {"id": model_id, "provider": provider},
        "context": pi_context,
        "options": pi_options,
    }


def main() -> None:
    if not os.environ.get("NODE_PATH"):
        sys.exit("set NODE_PATH to a node_modules folder with @earendil-works/pi-ai 1.6.1")
    request = [pi_case(*case) for case in cases()]
    done = subprocess.run(
        ["node", str(HERE / "pi_capture.mjs"), json.dumps(request)], capture_output=True, text=True, check=True
    )
    captured = {c["id"]: {"url": c["request"]["url"], "body": c["request"]["body"]} for c in json.loads(done.stdout)}
    OUT.write_text(json.dumps({"pi-ai": "1.6.1", "cases": captured}, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(captured)} request bodies -> {OUT}")


if __name__ == "__main__":
    main()
