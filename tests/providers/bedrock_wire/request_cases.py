"""Converse requests to compare: each case is a model, a context and options; agentloop's body for
it is compared with pi-ai's `commandInput` for the same case (test_bedrock_requests.py) and was
validated and serialized by boto3 (`boto3_oracle.py`, its answers in `boto3.json`).

    python -m tests.providers.bedrock_wire.request_cases   # writes requests.json for the oracle

Images are canonical base64 (so that boto3's re-encoding of the bytes gives the same text).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentloop as al
from agentloop.providers import get_model
from agentloop.providers._bedrock import converse_body
from agentloop.wire import to_json

HERE = Path(__file__).parent
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-not-really-a-png").decode()
GIF = base64.b64encode(b"GIF89a-pixels").decode()
REDACTED = base64.b64encode(b"\x00\x01opaque-reasoning\xff").decode()


class Weather:
    name = "get_weather"
    description = "Get the weather"
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["location"],
    }


@dataclass(frozen=True)
class Case:
    model: al.Model
    context: al.Context
    options: dict[str, Any] = field(default_factory=dict)

    def stream_options(self) -> al.StreamOptions:
        return al.StreamOptions(signal=al.AbortSignal(), **self.options)

    def body(self) -> dict[str, Any]:
        return converse_body(self.model, self.context, self.stream_options())


def _assistant(model: al.Model, *content: Any, stop: al.StopReason = "toolUse") -> al.AssistantMessage:
    return al.AssistantMessage(
        content=tuple(content), api=model.api, provider=model.provider, model=model.id, stop_reason=stop, timestamp=1
    )


def _conversation(model: al.Model) -> tuple[Any, ...]:
    """A turn with every kind of block: images, signed thinking, parallel calls, an error result."""
    return (
        al.UserMessage(
            content=(al.TextContent("What is the weather? See the map."), al.ImageContent(PNG, "image/png")),
            timestamp=1,
        ),
        _assistant(
            model,
            al.ThinkingContent("The user wants the weather.", thinking_signature="sig-abc=="),
            al.TextContent("Checking."),
            al.ToolCall(
                "tooluse_1", "get_weather", {"location": "Paris", "": "dropped", "nested": {"": 1, "a": [{"": 2}]}}
            ),
            al.ToolCall("call|with.bad:chars", "get_weather", {"location": "Lyon"}),
        ),
        al.ToolResultMessage(
            tool_call_id="tooluse_1", tool_name="get_weather", content=(al.TextContent("Sunny"),), timestamp=1
        ),
        al.ToolResultMessage(
            tool_call_id="call|with.bad:chars",
            tool_name="get_weather",
            content=(
                al.TextContent("radar failed"),
                al.ImageContent(GIF, "image/gif"),
                al.ImageContent(PNG, "image/png"),
            ),
            is_error=True,
            timestamp=1,
        ),
        al.UserMessage(content="   ", timestamp=1),
        al.UserMessage(content="Thanks! And tomorrow?", timestamp=1),
    )


def _cases() -> dict[str, Case]:
    sonnet = get_model("amazon-bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0")
    opus = get_model("amazon-bedrock", "anthropic.claude-opus-4-7")
    opus46 = get_model("amazon-bedrock", "us.anthropic.claude-opus-4-6-v1")
    micro = get_model("amazon-bedrock", "amazon.nova-micro-v1:0")
    oss = get_model("amazon-bedrock", "openai.gpt-oss-120b-1:0")
    gpt = get_model("amazon-bedrock", "openai.gpt-5.5")
    qwen = get_model("amazon-bedrock", "qwen.qwen3-32b-v1:0")
    arn = al.Model(
        id="arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc123",
        name="anthropic.claude-sonnet-4-5 (team profile)",
        api="bedrock-converse-stream",
        provider="amazon-bedrock",
        reasoning=True,
        input=("text", "image"),
        context_window=200_000,
        max_tokens=64_000,
    )
    other = _assistant(micro, al.ThinkingContent("Nova thought this."), al.TextContent("Nova said this."), stop="stop")
    replay = (
        al.UserMessage(content="hi", timestamp=1),
        _assistant(
            arn,
            al.ThinkingContent("[Reasoning redacted]", thinking_signature=REDACTED, redacted=True),
            al.ThinkingContent("unsigned thoughts"),
            al.ThinkingContent("  "),
            al.TextContent(""),
            al.TextContent("Hello."),
            stop="stop",
        ),
        al.UserMessage(content=(al.TextContent(""),), timestamp=1),
        other,
        al.UserMessage(content="again", timestamp=1),
    )
    system = "You are terse."
    return {
        "claude-budget": Case(
            sonnet,
            al.Context(system_prompt=system, messages=_conversation(sonnet), tools=[Weather()]),
            {"reasoning": "high", "max_tokens": 4000, "temperature": 0.5},
        ),
        "claude-budget-custom": Case(
            sonnet,
            al.Context(system_prompt=system, messages=(al.UserMessage(content="hi", timestamp=1),)),
            {"reasoning": "xhigh", "thinking_budgets": {"high": 3000, "low": 10}},
        ),
        "claude-adaptive": Case(
            opus,
            al.Context(system_prompt=system, messages=_conversation(opus), tools=[Weather()]),
            {"reasoning": "xhigh"},
        ),
        "claude-adaptive-4-6": Case(
            opus46, al.Context(messages=(al.UserMessage(content="hi", timestamp=1),)), {"reasoning": "max"}
        ),
        "claude-off": Case(sonnet, al.Context(system_prompt=system, messages=_conversation(sonnet)), {}),
        "nova-text-only": Case(
            micro,
            al.Context(system_prompt=system, messages=_conversation(micro), tools=[Weather()]),
            {"reasoning": "low", "temperature": 0.0},
        ),
        "gpt-oss": Case(
            oss, al.Context(messages=(al.UserMessage(content="hi", timestamp=1),)), {"reasoning": "minimal"}
        ),
        "gpt-mapped": Case(
            gpt, al.Context(messages=(al.UserMessage(content="hi", timestamp=1),)), {"reasoning": "xhigh"}
        ),
        "qwen-reasoning": Case(qwen, al.Context(messages=replay), {"reasoning": "medium"}),
        "arn-profile": Case(
            arn, al.Context(system_prompt=system, messages=replay), {"reasoning": "low", "max_tokens": 100}
        ),
    }


CASES = _cases()


def pi_model(model: al.Model) -> dict[str, Any]:
    """The model as pi-ai describes it."""
    data: dict[str, Any] = {
        "id": model.id,
        "name": model.name,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": model.base_url,
        "reasoning": model.reasoning,
        "input": list(model.input),
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
    }
    levels = (model.compat or {}).get("thinking_level_map")
    if levels:
        data["thinkingLevelMap"] = dict(levels)
    return data


def pi_case(case: Case) -> dict[str, Any]:
    """The case as pi-ai's `streamSimple` takes it."""
    options = {
        {"max_tokens": "maxTokens", "thinking_budgets": "thinkingBudgets"}.get(k, k): v for k, v in case.options.items()
    }
    context = {
        "systemPrompt": case.context.system_prompt,
        "messages": [to_json(m) for m in case.context.messages],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters} for t in case.context.tools
        ],
    }
    return {"model": pi_model(case.model), "context": context, "options": options}


if __name__ == "__main__":
    out = {name: {"modelId": case.model.id, "body": case.body()} for name, case in CASES.items()}
    (HERE / "requests.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(out)} requests written")
