"""Conformance runner: run the shared scenarios against agentloop and write normalized traces.

    python tests/conformance/run.py --scenarios DIR --out DIR [--backend asyncio|trio] [--only NAME ...]

Every `*.json` scenario of DIR is run (format: shared/conformance/FORMAT.md) and its trace
written to OUT/<name>.jsonl; compare them with the golden traces using shared/conformance/compare.py.
The harness (scripted tools, hook rules, queues, injections, listeners, normalization) mirrors
`ref-runner.mjs`; the library side uses agentloop's public API only (and `validation_in_line`, below).

A scenario runs in virtual time (`run`): the clock stands still while a task can run (but for a
microsecond per reading, so that a timer set later is due later), and when no task can run it
jumps to the next timer. A delay of the scenario (a tool's, a progress update's, a hook's, a
listener's, the model's, a `sleep` action) then lasts exactly its length however loaded the
machine is, and timers fire one at a time in the order they are due: the trace is the one an
idle machine gives, the golden's. (A stall of a loaded machine would otherwise make timers set
40 ms apart fire together, in an order of the scheduler's choosing, or shift one call's timers
against another's.) Tool arguments are validated in line, never in a worker thread: the clock
cannot see a thread's work, and would jump past it to the scenario's time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import re
import selectors
import sys
import traceback
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar

import anyio
import trio
from typing_extensions import TypeVarTuple, Unpack

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import agentloop as al
from agentloop._tools._tool import validation_in_line
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedThinking, ScriptedToolCall
from agentloop.wire import from_json, to_json

STANDARD_ROLES = ("user", "assistant", "toolResult")
VALIDATION_RE = re.compile(r'^Validation failed for tool "([^"]*)":\n')
PATH_RE = re.compile(r"^ {2}- ([^:]+):")
MODEL = al.Model(
    id="faux-1",
    name="Faux",
    api="faux",
    provider="faux",
    base_url="http://localhost:0",
    input=("text", "image"),
    context_window=128000,
    max_tokens=16384,
)


# --- normalization (FORMAT.md section 10.3) -------------------------------------------------


def norm_text(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    match = VALIDATION_RE.match(text)
    if not match:
        return text
    paths = [m.group(1) for line in text.split("\n") if (m := PATH_RE.match(line))]
    return f'Validation failed for tool "{match.group(1)}": {", ".join(paths)}'


def content_summary(content: Any) -> Any:
    if isinstance(content, str):
        return norm_text(content)
    if not isinstance(content, list):
        return content
    out = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            out.append({"type": "text", "text": norm_text(block["text"])})
        elif kind == "image":
            out.append({"type": "image", "mimeType": block["mimeType"]})
        elif kind == "thinking":
            out.append({"type": "thinking", "thinking": block["thinking"]})
        elif kind == "toolCall":
            summary = {"type": "toolCall", "id": block["id"], "name": block["name"], "arguments": block["arguments"]}
            if "argumentsError" in block:
                summary["argumentsError"] = block["argumentsError"]
            out.append(summary)
        else:
            out.append({"type": kind})
    return out


def msg(message: Any, partial: bool = False) -> Any:
    if message is None:
        return None
    m = message if isinstance(message, dict) else to_json(message)
    role = m.get("role")
    if role == "user":
        return {"role": "user", "content": content_summary(m["content"])}
    if role == "assistant":
        out = {"role": "assistant", "content": content_summary(m["content"])}
        if not partial:
            out["stopReason"] = m["stopReason"]
            if "errorMessage" in m:
                out["errorMessage"] = m["errorMessage"]
        return out
    if role == "toolResult":
        out = {
            "role": "toolResult",
            "toolCallId": m["toolCallId"],
            "toolName": m["toolName"],
            "content": content_summary(m["content"]),
            "isError": m["isError"],
        }
        if "details" in m:
            out["details"] = m["details"]
        return out
    return {k: copy.deepcopy(v) for k, v in m.items() if k != "timestamp"}


def roles(messages: Any) -> list[str]:
    return [m.role for m in messages if m.role != "system"]


def result_summary(result: Any) -> Any:
    if result is None:
        return None
    r = to_json(result)
    out = {"content": content_summary(r["content"])}
    for key in ("details", "isError", "terminate"):
        if key in r:
            out[key] = copy.deepcopy(r[key])
    return out


def assistant_event_summary(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    if hasattr(event, "content_index"):
        out["contentIndex"] = event.content_index
    if hasattr(event, "delta"):
        out["delta"] = event.delta
    if event.type in ("text_end", "thinking_end"):
        out["content"] = event.content
    if event.type == "toolcall_end":
        out["toolCall"] = content_summary([to_json(event.tool_call)])[0]
    return out


def event_line(e: Any) -> dict[str, Any]:
    t = e.type
    if t in ("agent_start", "turn_start"):
        return {"type": t}
    if t == "agent_end":
        return {"type": t, "messages": [msg(m) for m in e.messages]}
    if t == "turn_end":
        return {"type": t, "message": msg(e.message), "toolResults": [r.tool_call_id for r in e.tool_results]}
    if t == "message_start":
        return {"type": t, "message": msg(e.message, e.message.role == "assistant")}
    if t == "message_update":
        return {"type": t, "event": assistant_event_summary(e.assistant_message_event), "message": msg(e.message, True)}
    if t == "message_end":
        return {"type": t, "message": msg(e.message)}
    if t == "tool_execution_start":
        return {"type": t, "toolCallId": e.tool_call_id, "toolName": e.tool_name, "args": copy.deepcopy(e.args)}
    if t == "tool_execution_update":
        return {
            "type": t,
            "toolCallId": e.tool_call_id,
            "toolName": e.tool_name,
            "partialResult": result_summary(e.partial_result),
        }
    if t == "tool_execution_end":
        return {
            "type": t,
            "toolCallId": e.tool_call_id,
            "toolName": e.tool_name,
            "isError": e.is_error,
            "result": result_summary(e.result),
        }
    return {"type": t}


# --- matching -------------------------------------------------------------------------------


def get_path(obj: Any, dotted: str) -> Any:
    cur = obj
    for part in dotted.split("."):
        if cur is None:
            return None
        if isinstance(cur, dict):
            cur = cur.get(part, _MISSING)
        elif isinstance(cur, list) and part.isdigit():
            cur = cur[int(part)] if int(part) < len(cur) else _MISSING
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


class _Missing:
    pass


_MISSING = _Missing()


def deep_partial(actual: Any, want: Any) -> bool:
    if want is None or not isinstance(want, (dict, list)):
        if isinstance(want, bool) or isinstance(actual, bool):
            return type(actual) is type(want) and actual == want
        return actual is not _MISSING and actual == want and (actual is None) == (want is None)
    if isinstance(want, list):
        return isinstance(actual, list) and len(actual) == len(want) and all(map(deep_partial, actual, want))
    if not isinstance(actual, dict):
        return False
    return all(deep_partial(actual.get(k, _MISSING), w) for k, w in want.items())


def matches(line: dict[str, Any], pattern: dict[str, Any] | None) -> bool:
    if not pattern:
        return False
    return all(deep_partial(get_path(line, key), want) for key, want in pattern.items() if key != "nth")


# --- building messages from specs (FORMAT.md section 3) -------------------------------------


def build_block(spec: Any) -> Any:
    if isinstance(spec, str):
        return al.TextContent(spec)
    return from_json(spec)


def build_message(spec: Any) -> Any:
    if isinstance(spec, str):
        return al.UserMessage(content=spec)
    m = copy.deepcopy(spec)
    role = m.get("role")
    if role == "user":
        content = m.get("content", "")
        return al.UserMessage(content=content if isinstance(content, str) else tuple(build_block(b) for b in content))
    if role == "assistant":
        content = tuple(build_block(b) for b in m.get("content", []))
        has_call = any(isinstance(b, al.ToolCall) for b in content)
        return al.AssistantMessage(
            content=content,
            api=m.get("api", MODEL.api),
            provider=m.get("provider", MODEL.provider),
            model=m.get("model", MODEL.id),
            stop_reason=m.get("stopReason", "toolUse" if has_call else "stop"),
            error_message=m.get("errorMessage"),
        )
    if role == "toolResult":
        content = m.get("content", [])
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return al.ToolResultMessage(
            tool_call_id=m["toolCallId"],
            tool_name=m["toolName"],
            content=tuple(build_block(b) for b in content),
            details=m.get("details", {}),
            is_error=m.get("isError", False),
        )
    return al.CustomMessage(role=role, data={k: v for k, v in m.items() if k not in ("role", "timestamp")})


# --- the scripted model (FORMAT.md section 5) -----------------------------------------------


def build_response(spec: dict[str, Any]) -> Response:
    content: list[Any] = []
    for block in spec.get("content", []):
        if "text" in block:
            content.append(ScriptedText(block["text"]))
        elif "thinking" in block:
            content.append(ScriptedThinking(block["thinking"]))
        else:
            tc = block["toolCall"]
            content.append(
                ScriptedToolCall(
                    tc["id"],
                    tc["name"],
                    tc.get("arguments"),
                    tc.get("argsChunks"),
                    tc.get("argumentsError"),
                )
            )
    throw = spec.get("throw")
    return Response(
        content=content,
        stop_reason=spec.get("stopReason"),
        error_message=spec.get("errorMessage"),
        delay=spec.get("delayMs", 0) / 1000,
        chunk_delay=spec.get("chunkDelayMs", 0) / 1000,
        fail_before_start=bool(spec.get("failBeforeStart", False)),
        raise_on_call=Exception(throw) if throw is not None else None,
        raise_after=spec.get("throwAfterEvents"),
    )


class Scenario:
    def __init__(self, data: dict[str, Any], form: str = "emit") -> None:
        self.data = data
        self.form = form  # how a loop scenario is consumed: "emit" (run_agent_loop) or "bare" (async for)
        self.trace: list[dict[str, Any]] = []
        self.injections = [dict(inj, seen=0, fired=False) for inj in data.get("injections", [])]
        self.on_inject: Callable[[dict[str, Any]], None] = lambda inj: None
        self.cfg = data.get("config") or {}
        self.agent: al.Agent | None = None
        self.model = ScriptedModel([build_response(r) for r in data.get("model", {}).get("responses", [])])
        self.llm_calls = 0

    def rec(self, line: dict[str, Any]) -> None:
        self.trace.append(line)
        for inj in self.injections:
            if inj["fired"] or not matches(line, inj["on"]):
                continue
            inj["seen"] += 1
            if inj["seen"] < inj["on"].get("nth", 1):
                continue
            inj["fired"] = True
            self.on_inject(inj)

    def injection_line(self, inj: dict[str, Any], built: Any) -> dict[str, Any]:
        line: dict[str, Any] = {"type": "inject"}
        if "steer" in inj:
            line["steer"] = msg(built)
        if "followUp" in inj:
            line["followUp"] = msg(built)
        if inj.get("abort"):
            line["abort"] = True
        return line

    def built_injection(self, inj: dict[str, Any]) -> Any:
        if "steer" in inj:
            return build_message(inj["steer"])
        if "followUp" in inj:
            return build_message(inj["followUp"])
        return None

    # the stream function ------------------------------------------------------------------
    def stream_fn(self, model: al.Model, context: al.Context, options: al.StreamOptions) -> Any:
        self.llm_calls += 1
        self.rec(
            {
                "type": "llm:call",
                "n": self.llm_calls,
                "systemPrompt": context.system_prompt,
                "tools": [t.name for t in context.tools],
                "messages": [msg(m) for m in context.messages if m.role != "system"],  # type: ignore[comparison-overlap]
            }
        )
        return self.model(model, context, options)

    # tools ---------------------------------------------------------------------------------
    def make_tool(self, spec: dict[str, Any]) -> al.AgentTool:
        name = spec["name"]

        async def execute(tool_call_id: str, params: Any, signal: al.AbortSignal, on_update: Any) -> al.AgentToolResult:
            b = {**(spec.get("behavior") or {}), **((spec.get("perCall") or {}).get(tool_call_id) or {})}
            self.rec(
                {"type": "tool:execute", "toolCallId": tool_call_id, "toolName": name, "args": copy.deepcopy(params)}
            )
            honor = b.get("onAbort") == "throw"

            def abort_check() -> None:
                if honor and signal.aborted:
                    raise Exception(b.get("abortMessage", "Tool aborted"))

            abort_check()
            for update in b.get("updates", []):
                if update.get("delayMs"):
                    await sleep(update["delayMs"], signal if honor else None)
                abort_check()
                content = update.get("content") or [{"type": "text", "text": update.get("text", "")}]
                # reported without waiting for the listeners, as the reference's onUpdate
                on_update(
                    al.AgentToolResult(
                        content=tuple(build_block(c) for c in content), details=update.get("details", {})
                    )
                )
            if b.get("delayMs"):
                await sleep(b["delayMs"], signal if honor else None)
            abort_check()
            if "throw" in b:
                raise Exception(b["throw"])
            return build_result(b.get("result"), name, params)

        return al.AgentTool(
            name=name,
            label=spec.get("label", name),
            description=spec.get("description", f"{name} tool"),
            parameters=spec.get("parameters") or {"type": "object", "properties": {}},
            execute=execute,
            execution_mode=spec.get("executionMode"),
        )

    # hooks ---------------------------------------------------------------------------------
    def state_summary(self) -> dict[str, Any]:
        assert self.agent is not None
        s = self.agent.state
        out: dict[str, Any] = {
            "roles": roles(s.messages),
            "isStreaming": s.is_streaming,
            "streaming": s.streaming_message.role if s.streaming_message is not None else None,
            "pending": sorted(s.pending_tool_calls),
        }
        if s.error_message is not None:
            out["errorMessage"] = s.error_message
        return out

    def hooks(self, entry: str) -> dict[str, Any]:
        cfg = self.cfg
        hooks: dict[str, Any] = {}
        if "beforeToolCall" in cfg:
            before_rules = cfg["beforeToolCall"].get("rules", [])

            async def before(ctx: al.BeforeToolCallContext, signal: al.AbortSignal) -> Any:
                rule = find_rule(before_rules, ctx.tool_call)
                decision: dict[str, Any] | None = None
                if rule and rule.get("block"):
                    decision = {"block": True}
                    for key in ("reason", "terminate"):
                        if key in rule:
                            decision[key] = rule[key]
                line: dict[str, Any] = {
                    "type": "hook:beforeToolCall",
                    "toolCallId": ctx.tool_call.id,
                    "toolName": ctx.tool_call.name,
                    "args": copy.deepcopy(ctx.args),
                    "context": roles(ctx.context.messages),
                }
                if self.agent is not None:
                    line["state"] = self.state_summary()
                if rule and "throw" in rule:
                    line["throw"] = rule["throw"]
                else:
                    line["decision"] = decision
                self.rec(line)
                if rule and rule.get("delayMs"):
                    await sleep(rule["delayMs"])
                if rule and "throw" in rule:
                    raise Exception(rule["throw"])
                if decision is None:
                    return None
                return al.BeforeToolCallResult(
                    block=True, reason=decision.get("reason"), terminate=decision.get("terminate")
                )

            hooks["before_tool_call"] = before
        if "afterToolCall" in cfg:
            after_rules = cfg["afterToolCall"].get("rules", [])

            async def after(ctx: al.AfterToolCallContext, signal: al.AbortSignal) -> Any:
                rule = find_rule(after_rules, ctx.tool_call)
                override = None
                if rule and "throw" not in rule:
                    override = {
                        k: copy.deepcopy(rule[k]) for k in ("content", "details", "isError", "terminate") if k in rule
                    }
                line: dict[str, Any] = {
                    "type": "hook:afterToolCall",
                    "toolCallId": ctx.tool_call.id,
                    "toolName": ctx.tool_call.name,
                    "isError": ctx.is_error,
                    "result": result_summary(ctx.result),
                    "context": roles(ctx.context.messages),
                }
                if rule and "throw" in rule:
                    line["throw"] = rule["throw"]
                else:
                    line["override"] = override
                self.rec(line)
                if rule and rule.get("delayMs"):
                    await sleep(rule["delayMs"])
                if rule and "throw" in rule:
                    raise Exception(rule["throw"])
                if override is None:
                    return None
                content = override.get("content")
                return al.AfterToolCallResult(
                    content=tuple(build_block(c) for c in content) if content is not None else None,
                    details=override.get("details"),
                    is_error=override.get("isError"),
                    terminate=override.get("terminate"),
                )

            hooks["after_tool_call"] = after
        if "stopAfterTurn" in cfg:
            limit = cfg["stopAfterTurn"]
            turns = [0]

            async def stop(ctx: al.TurnContext) -> bool:
                turns[0] += 1
                decision: bool = turns[0] >= limit
                self.rec({"type": "hook:stopAfterTurn", "turn": turns[0], "stop": decision})
                return decision

            hooks["should_stop_after_turn"] = stop
        if "transformContext" in cfg:
            keep_last = cfg["transformContext"].get("keepLast")

            async def transform(messages: Any, signal: al.AbortSignal) -> Any:
                out = list(messages)
                if keep_last is not None:
                    non_system = [m for m in messages if m.role != "system"]
                    keep = {id(m) for m in (non_system[-keep_last:] if keep_last > 0 else [])}
                    out = [m for m in messages if m.role == "system" or id(m) in keep]
                self.rec({"type": "hook:transformContext", "in": roles(messages), "out": roles(out)})
                return out

            hooks["transform_context"] = transform
        if "convertToLlm" in cfg:
            drop = set(cfg["convertToLlm"].get("drop", []))
            to_user = set(cfg["convertToLlm"].get("toUser", []))

            def convert(messages: Any) -> Any:
                out = []
                for m in messages:
                    if m.role in drop:
                        continue
                    if m.role in to_user:
                        data = m.data if isinstance(m, al.CustomMessage) else {}
                        content = data.get("content", data.get("text", ""))
                        if content is None:
                            content = ""
                        if not isinstance(content, str):
                            content = tuple(build_block(b) for b in content)
                        out.append(al.UserMessage(content=content, timestamp=m.timestamp))
                        continue
                    if m.role in STANDARD_ROLES:
                        out.append(m)
                self.rec({"type": "hook:convertToLlm", "in": roles(messages), "out": roles(out)})
                return out

            hooks["convert_to_llm"] = convert
        return hooks

    # runs ----------------------------------------------------------------------------------
    async def run_loop(self) -> None:
        data = self.data
        cfg = self.cfg
        signal = al.AbortSignal()
        steering = make_queue(cfg.get("steeringMode", "one-at-a-time"), data.get("queues", {}).get("steering"))
        follow_up = make_queue(cfg.get("followUpMode", "one-at-a-time"), data.get("queues", {}).get("followUp"))

        def on_inject(inj: dict[str, Any]) -> None:
            built = self.built_injection(inj)
            self.rec(self.injection_line(inj, built))
            if "steer" in inj:
                steering.append(built)
            if "followUp" in inj:
                follow_up.append(built)
            if inj.get("abort"):
                signal.abort()

        self.on_inject = on_inject
        tools = [self.make_tool(t) for t in data.get("tools", [])]
        config_args: dict[str, Any] = dict(self.hooks(data["entry"]))
        if "toolExecution" in cfg:
            config_args["tool_execution"] = cfg["toolExecution"]
        config = al.AgentLoopConfig(
            model=MODEL,
            get_steering_messages=lambda: drain(steering, cfg.get("steeringMode", "one-at-a-time")),
            get_follow_up_messages=lambda: drain(follow_up, cfg.get("followUpMode", "one-at-a-time")),
            **config_args,
        )
        context = al.AgentContext(
            system_prompt=(data.get("context") or {}).get("systemPrompt", ""),
            messages=[build_message(m) for m in (data.get("context") or {}).get("messages", [])],
            tools=tools,
        )

        def emit(event: Any) -> None:
            self.rec(event_line(event))

        try:
            prompts = [build_message(p) for p in data.get("prompts", [])] if data["entry"] == "agent_loop" else None
            if self.form == "bare":
                result = await self.run_bare(prompts, context, config, signal)
            elif prompts is not None:
                result = await al.run_agent_loop(prompts, context, config, emit, signal, self.stream_fn)
            else:
                result = await al.run_agent_loop_continue(context, config, emit, signal, self.stream_fn)
            self.rec({"type": "return", "messages": len(result)})
        except Exception as exc:
            self.rec({"type": "raise", "message": str(exc)})

    async def run_bare(
        self,
        prompts: list[Any] | None,
        context: al.AgentContext,
        config: al.AgentLoopConfig,
        signal: al.AbortSignal,
    ) -> list[Any]:
        """The same run through a bare `async for event in agent_loop(...)`; its new messages."""
        if prompts is not None:
            loop = al.agent_loop(prompts, context, config, signal, self.stream_fn)
        else:
            loop = al.agent_loop_continue(context, config, signal, self.stream_fn)
        result: list[Any] = []
        async with aclosing(loop) as events:
            async for event in events:
                self.rec(event_line(event))
                if isinstance(event, al.AgentEnd):
                    result = list(event.messages)
        return result

    async def run_agent(self) -> None:
        data = self.data
        cfg = self.cfg
        tools = [self.make_tool(t) for t in data.get("tools", [])]
        options: dict[str, Any] = dict(self.hooks("agent"))
        for key, name in (
            ("steeringMode", "steering_mode"),
            ("followUpMode", "follow_up_mode"),
            ("toolExecution", "tool_execution"),
        ):
            if key in cfg:
                options[name] = cfg[key]
        agent = al.Agent(
            model=MODEL,
            system_prompt=(data.get("context") or {}).get("systemPrompt", ""),
            tools=tools,
            messages=[build_message(m) for m in (data.get("context") or {}).get("messages", [])],
            stream_fn=self.stream_fn,
            **options,
        )
        self.agent = agent

        def on_inject(inj: dict[str, Any]) -> None:
            built = self.built_injection(inj)
            self.rec(self.injection_line(inj, built))
            if "steer" in inj:
                agent.steer(built)
            if "followUp" in inj:
                agent.follow_up(built)
            if inj.get("abort"):
                agent.abort()

        self.on_inject = on_inject
        agent.subscribe(lambda event, signal: self.rec(event_line(event)))
        for spec in data.get("agent", {}).get("listeners", []):
            agent.subscribe(self.make_listener(spec))

        pending: list[tuple[str, Any]] = []

        async def settle(label: str, outcome: list[Any]) -> None:
            if outcome and outcome[0] == "error":
                self.rec({"type": "action:error", "do": label, "message": outcome[1]})
            else:
                self.rec({"type": "action:done", "do": label})

        async with anyio.create_task_group() as tg:

            async def invoke(call: Callable[[], Any], outcome: list[Any], done: anyio.Event) -> None:
                try:
                    await call()
                    outcome.append("done")
                except Exception as exc:
                    outcome.extend(["error", str(exc)])
                finally:
                    done.set()

            async def settle_pending() -> None:
                for label, (outcome, done) in pending:
                    await done.wait()
                    await settle(label, outcome)
                pending.clear()

            for action in data.get("agent", {}).get("actions", []):
                kind = action["do"]
                line: dict[str, Any] = {"type": "action", "do": kind}
                call: Callable[[], Any] | None = None
                if kind == "prompt":
                    if "text" in action:
                        line["text"] = action["text"]
                        text = action["text"]
                        call = lambda text=text: agent.prompt(text)  # noqa: E731
                    elif "messages" in action:
                        built = [build_message(m) for m in action["messages"]]
                        line["messages"] = [msg(m) for m in built]
                        call = lambda built=built: agent.prompt(built)  # noqa: E731
                    else:
                        one = build_message(action["message"])
                        line["message"] = msg(one)
                        call = lambda one=one: agent.prompt(one)  # noqa: E731
                elif kind == "continue":
                    call = agent.continue_
                elif kind in ("steer", "followUp"):
                    built_one = build_message(action["message"])
                    line["message"] = msg(built_one)
                elif kind == "sleep":
                    line["ms"] = action["ms"]
                if action.get("wait") is False:
                    line["wait"] = False
                if kind != "sleep":
                    self.rec(line)
                if kind == "state":
                    self.rec({"type": "state", **self.state_summary()})
                elif kind == "sleep":
                    await anyio.sleep(action["ms"] / 1000)
                elif kind == "waitForIdle":
                    await agent.wait_for_idle()
                    self.rec({"type": "action:done", "do": "waitForIdle"})
                    await settle_pending()
                elif kind in ("prompt", "continue"):
                    assert call is not None
                    outcome: list[Any] = []
                    done = anyio.Event()
                    if action.get("wait") is False:
                        tg.start_soon(invoke, call, outcome, done)
                        pending.append((kind, (outcome, done)))
                    else:
                        await invoke(call, outcome, done)
                        await settle(kind, outcome)
                elif kind == "steer":
                    agent.steer(built_one)
                elif kind == "followUp":
                    agent.follow_up(built_one)
                elif kind == "abort":
                    agent.abort()
            await agent.wait_for_idle()
            await settle_pending()
        s = agent.state
        final: dict[str, Any] = {
            "type": "final",
            "systemPrompt": s.system_prompt,
            "messages": [msg(m) for m in s.messages if m.role != "system"],
            "isStreaming": s.is_streaming,
            "pending": sorted(s.pending_tool_calls),
            "queued": agent.has_queued_messages(),
        }
        if s.error_message is not None:
            final["errorMessage"] = s.error_message
        self.rec(final)

    def make_listener(self, spec: dict[str, Any]) -> Callable[..., Any]:
        ons = spec["on"] if isinstance(spec["on"], list) else [spec["on"]]
        thrown = [False]

        async def listener(event: Any, signal: al.AbortSignal) -> None:
            line = event_line(event)
            if not any(matches(line, on) for on in ons):
                return
            entry: dict[str, Any] = {"type": "listener", "id": spec["id"], "event": event.type}
            if spec.get("recordState"):
                entry["state"] = self.state_summary()
            self.rec(entry)
            if spec.get("delayMs"):
                await anyio.sleep(spec["delayMs"] / 1000)
                self.rec({"type": "listener:exit", "id": spec["id"], "event": event.type})
            if "throw" in spec and not (spec.get("once") and thrown[0]):
                thrown[0] = True
                raise Exception(spec["throw"])

        return listener


def find_rule(rules: list[dict[str, Any]], tool_call: al.ToolCall) -> dict[str, Any] | None:
    for rule in rules:
        if rule.get("tool", tool_call.name) == tool_call.name and rule.get("toolCallId", tool_call.id) == tool_call.id:
            return rule
    return None


def build_result(spec: dict[str, Any] | None, name: str, args: Any) -> al.AgentToolResult:
    default_text = f"{name}: {json.dumps(args, separators=(',', ':'), ensure_ascii=False)}"
    if spec is None:
        return al.AgentToolResult(content=(al.TextContent(default_text),), details={})
    if "content" in spec:
        content = tuple(build_block(c) for c in spec["content"])
    else:
        content = (al.TextContent(spec.get("text", default_text)),)
    return al.AgentToolResult(
        content=content,
        details=copy.deepcopy(spec.get("details", {})),
        is_error=spec.get("isError"),
        terminate=spec.get("terminate"),
    )


def make_queue(mode: str, initial: list[Any] | None) -> list[Any]:
    return [build_message(m) for m in initial or []]


def drain(queue: list[Any], mode: str) -> list[Any]:
    if mode == "all":
        out = list(queue)
        queue.clear()
        return out
    return [queue.pop(0)] if queue else []


async def sleep(ms: float, signal: al.AbortSignal | None = None) -> None:
    """Sleep; with a signal, wake early on abort."""
    if signal is None:
        await anyio.sleep(ms / 1000)
        return
    if signal.aborted:
        return
    with anyio.CancelScope() as scope:
        remove = signal.on_abort(scope.cancel)
        try:
            await anyio.sleep(ms / 1000)
        finally:
            remove()


# --- virtual time ---------------------------------------------------------------------------

TICK = 1e-6
"""How far the virtual clock moves on each time it is read: of two timers with the same delay, the
one set later is due later (and fires in a pass of its own), as on a real machine and as in
JavaScript."""


class VirtualClock:
    """The time of one run: it moves on by a tick per reading and by jumps to the next timer."""

    def __init__(self) -> None:
        self.now = 0.0
        self.last_read = 0.0

    def read(self) -> float:
        self.last_read = self.now
        self.now += TICK
        return self.last_read

    def jump_to(self, deadline: float) -> None:
        """On to `deadline`: the next reading gives it (a timer due then fires, not one set later)."""
        self.now = max(self.now, deadline)


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that never sleeps. The loop asks it to wait `timeout` seconds only when no task
    can run, `timeout` being the time from its last reading of the clock to its next timer: when
    no I/O is ready, the clock jumps to that timer instead."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(None if timeout is None else 0)
        if not ready and timeout:
            self.clock.jump_to(self.clock.last_read + timeout)
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop in virtual time."""

    def __init__(self) -> None:
        self._clock = VirtualClock()
        super().__init__(_JumpingSelector(self._clock))

    def time(self) -> float:
        return self._clock.read()


class TrioVirtualClock(trio.abc.Clock):
    """Trio in virtual time. Trio asks how long to sleep only when no task can run: the clock
    jumps to the deadline and the answer is "not at all" (forever when there is no deadline)."""

    def __init__(self) -> None:
        self._clock = VirtualClock()

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._clock.read()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        if math.isinf(deadline):
            return deadline
        self._clock.jump_to(deadline)
        return 0.0


T = TypeVar("T")
Ts = TypeVarTuple("Ts")


def run_virtual(func: Callable[[Unpack[Ts]], Awaitable[T]], backend: str, *args: Unpack[Ts]) -> T:
    """`anyio.run` in virtual time."""
    if backend == "trio":
        options: dict[str, Any] = {"clock": TrioVirtualClock()}
    else:
        options = {"loop_factory": VirtualTimeLoop}
    return anyio.run(func, *args, backend=backend, backend_options=options)


def run(data: dict[str, Any], form: str = "emit", backend: str = "asyncio") -> list[dict[str, Any]]:
    """Run one scenario in virtual time on `backend` (see the module's docstring); its trace."""
    return run_virtual(run_scenario, backend, data, form)


async def run_scenario(data: dict[str, Any], form: str = "emit") -> list[dict[str, Any]]:
    """Run one scenario; `form="bare"` consumes a loop scenario with `async for event in agent_loop(...)`."""
    scenario = Scenario(data, form)
    with validation_in_line(), anyio.move_on_after(data.get("timeoutMs", 10000) / 1000):
        try:
            if data["entry"] == "agent":
                await scenario.run_agent()
            else:
                await scenario.run_loop()
        except Exception as exc:  # a runner bug: keep the lines so far, say what happened
            traceback.print_exc()
            scenario.trace.append({"type": "runner-error", "message": f"{type(exc).__name__}: {exc}"})
    return scenario.trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--form", choices=("emit", "bare"), default="emit", help="how loop scenarios are consumed")
    args = parser.parse_args(argv)
    if not args.scenarios.is_dir():
        parser.error(f"--scenarios {args.scenarios} is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    paths = sorted(args.scenarios.glob("*.json"))
    for path in paths:
        if args.only and path.stem not in args.only:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        trace = run(data, args.form, args.backend)
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in trace)
        (args.out / f"{data.get('name', path.stem)}.jsonl").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
