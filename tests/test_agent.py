"""Tests of `Agent`: state, listeners and the barrier, queues, continue_, failures, abort, cancellation.

The behaviour follows spec/PROFILE.md ("Agent"), then pi-agent-core 0.73.1 (REFERENCE.md 10.1),
then 1.6.0 for run failures and `reset()` (REFERENCE.md 10.2).
"""

from __future__ import annotations

import dataclasses
import gc
import re
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import pytest

from agentloop import (
    DEFAULT_MODEL,
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentEnd,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Context,
    ImageContent,
    InvalidContextError,
    LoopOptions,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    StreamOptions,
    TextContent,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
    TurnEnd,
    UserMessage,
    tool,
)
from agentloop.testing import Response, ScriptedModel, ScriptedText, ScriptedToolCall, check_events

from .support import as_assistant

PROMPT_BUSY = (
    "Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait for completion."
)
CONTINUE_BUSY = "Agent is already processing. Wait for completion before continuing."
RESET_BUSY = "Agent is already processing. Wait for completion before resetting."

ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


# --- helpers ---------------------------------------------------------------------------------


def user(text: str) -> UserMessage:
    return UserMessage(content=(TextContent(text),))


def assistant(text: str) -> AssistantMessage:
    return AssistantMessage(content=(TextContent(text),), api="a", provider="p", model="m")


def text_of(message: Any) -> str:
    """The text of a user, assistant or toolResult message."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def roles(messages: Sequence[Any]) -> list[str]:
    return [m.role for m in messages]


def record(agent: Agent) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    agent.subscribe(lambda event, signal: events.append(event))
    return events


def types(events: Sequence[AgentEvent]) -> list[str]:
    return [e.type for e in events]


def echo_tool() -> AgentTool:
    async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult.from_text(f"echo {params['text']}")

    return AgentTool(name="echo", description="Echo the text.", parameters=ECHO_SCHEMA, execute=execute)


def tool_call_response(*calls: tuple[str, str, dict[str, Any]], **kwargs: Any) -> Response:
    return Response(content=[ScriptedToolCall(cid, name, args) for cid, name, args in calls], **kwargs)


# --- default state and constructor ----------------------------------------------------------


def test_default_state() -> None:
    agent = Agent()
    state = agent.state
    assert state.model is DEFAULT_MODEL
    assert state.model.id == "unknown"
    assert state.system_prompt == ""
    assert state.thinking_level == "off"
    assert state.tools == []
    assert state.messages == []
    assert state.is_streaming is False
    assert state.streaming_message is None
    assert state.pending_tool_calls == frozenset()
    assert isinstance(state.pending_tool_calls, frozenset)
    assert state.error_message is None
    assert agent.signal is None
    assert agent.steering_mode == "one-at-a-time"
    assert agent.follow_up_mode == "one-at-a-time"
    assert agent.has_queued_messages() is False
    assert agent.peek_queued_messages() == []


def test_custom_initial_state() -> None:
    model = Model(id="m1", name="M1", api="api", provider="prov")
    tools = [echo_tool()]
    messages = [user("hi")]
    agent = Agent(model=model, system_prompt="Be brief.", thinking_level="low", tools=tools, messages=messages)
    assert agent.state.model is model
    assert agent.state.system_prompt == "Be brief."
    assert agent.state.thinking_level == "low"
    assert agent.state.tools == tools and agent.state.tools is not tools
    assert agent.state.messages == messages and agent.state.messages is not messages


OPTION_ERRORS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"tool_execution": "random"}, ValueError, "^tool_execution must be 'parallel' or 'sequential'"),
    ({"max_turns": 0}, ValueError, "^max_turns must be a positive int"),
    ({"tool_abort_grace": -1.0}, ValueError, "^tool_abort_grace must be a number of seconds"),
    ({"max_tokens": "x"}, TypeError, "^max_tokens must be a positive int or None, got 'x'"),
    ({"max_tokens": 0}, ValueError, "^max_tokens must be a positive int"),
    ({"session_id": 5}, TypeError, "^session_id must be a str or None"),
    ({"thinking_budgets": [1]}, TypeError, "^thinking_budgets must be a mapping"),
    ({"max_retry_delay": -0.5}, ValueError, "^max_retry_delay must be a finite number of seconds >= 0"),
    ({"cache_retention": "forever"}, ValueError, "^cache_retention must be 'none', 'short', 'long' or None"),
    ({"convert_to_llm": None}, TypeError, "^convert_to_llm must be callable"),
    ({"before_tool_call": 1}, TypeError, "^before_tool_call must be callable or None"),
    ({"observe": "print"}, TypeError, "^observe must be callable or None"),
    ({"propagate": [ValueError]}, TypeError, "^propagate must be a tuple of exception classes"),
]
"""Bad loop options, as the constructor and `options.replace` refuse them."""


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"thinking_level": "extreme"}, ValueError, "thinking_level"),
        ({"steering_mode": "some"}, ValueError, "steering_mode"),
        ({"follow_up_mode": "many"}, ValueError, "follow_up_mode"),
        ({"tools": [object()]}, TypeError, r"tools\[0\] must be an AgentTool"),
        ({"tools": "echo"}, TypeError, "tools must be a sequence"),
        ({"messages": [{"role": "user", "content": "hi"}]}, TypeError, r"messages\[0\] must be a UserMessage"),
        ({"messages": "hello"}, TypeError, "messages must be a sequence"),
        ({"model": "gpt-4o"}, TypeError, "model must be an agentloop.Model"),
        ({"stream_fn": 42}, TypeError, "stream_fn must be callable"),
        ({"system_prompt": 5}, TypeError, "^system_prompt must be a str, got int"),
        *OPTION_ERRORS,
    ],
)
def test_constructor_argument_errors(kwargs: dict[str, Any], error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        Agent(**kwargs)


def test_state_setters_copy_and_validate() -> None:
    agent = Agent()
    tools = [echo_tool()]
    agent.state.tools = tools
    assert agent.state.tools == tools
    assert agent.state.tools is not tools
    tools.append(echo_tool())
    assert len(agent.state.tools) == 1

    messages: list[Any] = [user("a"), assistant("b")]
    agent.state.messages = messages
    assert agent.state.messages == messages
    assert agent.state.messages is not messages
    messages.clear()
    assert len(agent.state.messages) == 2

    model = Model(id="other", provider="prov", api="api")
    agent.state.model = model
    assert agent.state.model is model
    for level in ("off", "minimal", "low", "medium", "high", "xhigh", "max"):
        agent.state.thinking_level = level
        assert agent.state.thinking_level == level
    agent.state.system_prompt = "New prompt"
    assert agent.state.system_prompt == "New prompt"
    with pytest.raises(TypeError, match="system_prompt must be a str, got NoneType"):
        agent.state.system_prompt = None  # type: ignore[assignment]
    assert agent.state.system_prompt == "New prompt"

    with pytest.raises(TypeError, match=r"model must be an agentloop\.Model"):
        agent.state.model = "gpt"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="thinking_level"):
        agent.state.thinking_level = "huge"  # type: ignore[assignment]
    with pytest.raises(TypeError):
        agent.state.tools = [object()]  # type: ignore[list-item]
    with pytest.raises(TypeError):
        agent.state.messages = [object()]  # type: ignore[list-item]
    # A failed assignment leaves the old value.
    assert agent.state.model is model
    assert agent.state.thinking_level == "max"
    assert len(agent.state.tools) == 1
    assert len(agent.state.messages) == 2


def test_read_only_state_fields() -> None:
    agent = Agent()
    for name in ("is_streaming", "streaming_message", "pending_tool_calls", "error_message"):
        with pytest.raises(AttributeError):
            setattr(agent.state, name, None)


def test_queue_mode_setters_validate() -> None:
    agent = Agent()
    agent.steering_mode = "all"
    agent.follow_up_mode = "all"
    assert agent.steering_mode == "all"
    assert agent.follow_up_mode == "all"
    with pytest.raises(ValueError, match="steering_mode"):
        agent.steering_mode = "two"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="follow_up_mode"):
        agent.follow_up_mode = "two"  # type: ignore[assignment]
    assert agent.steering_mode == "all"


# --- identity, repr and options ---------------------------------------------------------------


def test_two_agents_are_equal_only_if_they_are_the_same_agent() -> None:
    first, second = Agent(), Agent()
    assert first == first and first != second
    first.state.messages = [user("hi")]
    third = Agent(messages=[user("hi")])
    assert first != second and first != third and first.options == second.options


def test_an_agent_is_hashable_a_dict_key_and_a_weakset_member() -> None:
    agent = Agent()
    before = hash(agent)
    agent.state.messages = [user("hi")]
    agent.options = agent.options.replace(max_turns=2)
    assert hash(agent) == before, "the hash does not follow the state"
    other = Agent()
    names = {agent: "first", other: "second"}
    assert names[agent] == "first" and names[other] == "second"
    alive: weakref.WeakSet[Agent] = weakref.WeakSet([agent, other])
    assert agent in alive and len(alive) == 2
    del names, other
    gc.collect()
    assert list(alive) == [agent]


async def test_the_repr_shows_the_model_the_transcript_and_whether_a_run_is_going(anyio_backend: object) -> None:
    model = Model(id="m1", provider="prov", api="api")
    agent = Agent(model=model, tools=[echo_tool()], stream_fn=ScriptedModel(["hello"]), api_key="sk-secret")
    assert repr(agent) == "<Agent model='m1' messages=0 tools=1 idle>"
    during: list[str] = []
    agent.subscribe(lambda event, signal: during.append(repr(agent)) if event.type == "message_end" else None)
    with anyio.fail_after(5):
        await agent.prompt("hi")
    assert during == [
        "<Agent model='m1' messages=1 tools=1 running>",
        "<Agent model='m1' messages=2 tools=1 running>",
    ]
    agent.follow_up(user("later"))
    assert repr(agent) == "<Agent model='m1' messages=2 tools=1 queued=1 idle>"
    assert "sk-secret" not in repr(agent) and "sk-secret" not in repr(agent.options)


def test_the_options_are_frozen_and_the_constructors_own() -> None:
    agent = Agent(max_turns=3, tool_execution="sequential")
    options = agent.options
    assert options == LoopOptions(max_turns=3, tool_execution="sequential")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_turns = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        agent.max_turns = 4  # type: ignore[attr-defined]
    assert agent.options is options and options.max_turns == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        *OPTION_ERRORS,
        ({"max_turn": 3}, TypeError, "unexpected keyword argument 'max_turn'"),
    ],
)
def test_replace_checks_the_new_values_naming_the_option(
    kwargs: dict[str, Any], error: type[Exception], pattern: str
) -> None:
    agent = Agent(max_turns=3)
    options = agent.options
    with pytest.raises(error, match=pattern):
        agent.options = agent.options.replace(**kwargs)
    assert agent.options is options and options.max_turns == 3


@pytest.mark.parametrize(
    "value", [{"max_turns": 3}, None, AgentLoopConfig(model=DEFAULT_MODEL)], ids=["dict", "None", "config"]
)
def test_the_options_are_set_to_loop_options_only(value: Any) -> None:
    agent = Agent()
    with pytest.raises(TypeError, match=r"^options must be an agentloop\.LoopOptions, got "):
        agent.options = value
    assert agent.options == LoopOptions()
    agent.options = shared = LoopOptions(max_turns=1)
    assert agent.options is shared


async def test_replaced_options_apply_from_the_next_run_on(anyio_backend: object) -> None:
    blocked: list[str] = []

    def block(ctx: BeforeToolCallContext, signal: AbortSignal) -> BeforeToolCallResult:
        blocked.append(ctx.tool_call.id)
        return BeforeToolCallResult(block=True, reason="not now")

    script: list[Response | str] = [
        tool_call_response(("c1", "echo", {"text": "a"})),
        "one",
        tool_call_response(("c2", "echo", {"text": "b"})),
        "two",
    ]
    agent = Agent(stream_fn=ScriptedModel(script), tools=[echo_tool()])

    def replace_at_start(event: AgentEvent, signal: AbortSignal) -> None:
        if event.type == "agent_start" and agent.options.before_tool_call is None:
            agent.options = agent.options.replace(before_tool_call=block)

    agent.subscribe(replace_at_start)
    with anyio.fail_after(5):
        await agent.prompt("first")
        assert blocked == [], "the run going on keeps the options it started with"
        await agent.prompt("second")
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, text_of(r), r.is_error) for r in results] == [
        ("c1", "echo a", False),
        ("c2", "not now", True),
    ]
    assert blocked == ["c2"]


# --- queues on an idle agent -----------------------------------------------------------------


def test_queues_idle() -> None:
    agent = Agent()
    s1, s2, f1, f2 = user("s1"), user("s2"), user("f1"), user("f2")
    agent.steer(s1)
    agent.steer(s2)
    agent.follow_up(f1)
    agent.follow_up(f2)
    assert agent.state.messages == []  # queued, not in the transcript
    assert agent.has_queued_messages() is True
    # Steering first; one-at-a-time peeks one message; peeking does not consume.
    assert agent.peek_queued_messages() == [s1]
    assert agent.peek_queued_messages() == [s1]
    agent.steering_mode = "all"
    assert agent.peek_queued_messages() == [s1, s2]
    agent.clear_steering_queue()
    assert agent.peek_queued_messages() == [f1]
    agent.follow_up_mode = "all"
    assert agent.peek_queued_messages() == [f1, f2]
    assert agent.has_queued_messages() is True
    agent.clear_follow_up_queue()
    assert agent.has_queued_messages() is False
    assert agent.peek_queued_messages() == []

    agent.steer(s1)
    agent.follow_up(f1)
    agent.clear_all_queues()
    assert agent.has_queued_messages() is False

    agent.follow_up(f2)
    assert agent.has_queued_messages() is True
    assert agent.peek_queued_messages() == [f2]


def test_steer_and_follow_up_reject_non_messages() -> None:
    agent = Agent()
    with pytest.raises(TypeError):
        agent.steer("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        agent.follow_up({"role": "user", "content": "x"})  # type: ignore[arg-type]
    assert agent.has_queued_messages() is False


def test_subscribe_rejects_non_callable() -> None:
    with pytest.raises(TypeError, match="listener must be callable"):
        Agent().subscribe(42)  # type: ignore[arg-type]


def test_abort_idle_is_noop() -> None:
    agent = Agent()
    agent.abort()
    agent.abort()
    assert agent.signal is None
    assert agent.state.is_streaming is False


# --- prompt ----------------------------------------------------------------------------------


async def test_prompt_text_builds_user_message(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["Hello back"])
        agent = Agent(stream_fn=model)
        await agent.prompt("Hello")
        first = agent.state.messages[0]
        assert isinstance(first, UserMessage)
        assert first.content == (TextContent("Hello"),)
        assert roles(agent.state.messages) == ["user", "assistant"]
        assert as_assistant(agent.state.messages[1]).text == "Hello back"
        assert model.calls[0].messages == (first,)


async def test_prompt_text_with_images(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        image = ImageContent(data="aGVsbG8=", mime_type="image/png")
        model = ScriptedModel(["I see it"])
        agent = Agent(stream_fn=model)
        await agent.prompt("What is this?", [image])
        first = agent.state.messages[0]
        assert isinstance(first, UserMessage)
        assert first.content == (TextContent("What is this?"), image)
        assert model.calls[0].messages[0].content == (TextContent("What is this?"), image)


async def test_prompt_one_message(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel(["ok"]))
        events = record(agent)
        message = user("as a message")
        await agent.prompt(message)
        assert agent.state.messages[0] is message
        starts = [e.message for e in events if isinstance(e, MessageStart)]
        assert starts[0] is message


async def test_prompt_list_of_messages(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["ok"])
        agent = Agent(stream_fn=model)
        events = record(agent)
        m1, m2 = user("one"), user("two")
        await agent.prompt([m1, m2])
        assert agent.state.messages[:2] == [m1, m2]
        assert roles(agent.state.messages) == ["user", "user", "assistant"]
        ends = [e.message for e in events if isinstance(e, MessageEnd)]
        assert ends[:2] == [m1, m2]
        assert list(model.calls[0].messages) == [m1, m2]
        check_events(events)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((42,), r"prompt input\[0\] must be a UserMessage.*got int"),
        (({"role": "user", "content": "hi"},), r"prompt input\[0\] must be a UserMessage.*got dict"),
        (([user("ok"), "not a message"],), r"prompt input\[1\]"),
        ((user("m"), [ImageContent(data="eA==", mime_type="image/png")]), "images can only be given"),
        (("text", ["not an image"]), r"images\[0\] must be an ImageContent"),
    ],
)
async def test_prompt_bad_input(anyio_backend: object, args: tuple[Any, ...], pattern: str) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["unused"])
        agent = Agent(stream_fn=model)
        events = record(agent)
        with pytest.raises(TypeError, match=pattern):
            await agent.prompt(*args)
        assert events == []
        assert model.calls == []
        assert agent.state.messages == []
        assert agent.state.is_streaming is False
        assert agent.signal is None
        # The agent is still usable.
        await agent.prompt("fine")
        assert roles(agent.state.messages) == ["user", "assistant"]


# --- listeners -------------------------------------------------------------------------------


async def test_listeners_awaited_in_registration_order(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel(["ok"]))
        log: list[tuple[str, str]] = []

        def sync_listener(event: AgentEvent, signal: AbortSignal) -> None:
            log.append(("sync", event.type))

        async def async_listener(event: AgentEvent, signal: AbortSignal) -> None:
            await anyio.sleep(0.001)
            log.append(("async", event.type))

        def last_listener(event: AgentEvent, signal: AbortSignal) -> None:
            log.append(("last", event.type))

        agent.subscribe(sync_listener)
        agent.subscribe(async_listener)
        agent.subscribe(last_listener)
        await agent.prompt("hi")
        event_types = [t for who, t in log if who == "sync"]
        assert event_types[0] == "agent_start" and event_types[-1] == "agent_end"
        # For every event: sync, then async (after its await), then last.
        expected = [(who, t) for t in event_types for who in ("sync", "async", "last")]
        assert log == expected


async def test_listener_receives_run_signal(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel(["ok"]))
        seen: list[tuple[AbortSignal, AbortSignal | None]] = []
        agent.subscribe(lambda event, signal: seen.append((signal, agent.signal)))
        assert agent.signal is None
        await agent.prompt("hi")
        assert seen
        first_signal = seen[0][0]
        assert isinstance(first_signal, AbortSignal)
        assert first_signal.aborted is False
        assert all(signal is first_signal and current is first_signal for signal, current in seen)
        assert agent.signal is None

        # A new run gets a new signal.
        seen.clear()
        agent.state.messages = []
        agent.stream_fn = ScriptedModel(["again"])
        await agent.prompt("hi")
        assert seen[0][0] is not first_signal


async def test_unsubscribe_and_duplicate_subscribe(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel(["one", "two"]))
        calls: list[str] = []

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            calls.append(event.type)

        unsubscribe = agent.subscribe(listener)
        unsubscribe_again = agent.subscribe(listener)  # already subscribed: held once
        other: list[str] = []
        agent.subscribe(lambda e, s: other.append(e.type))
        await agent.prompt("hi")
        assert calls == other  # once per event, not twice
        assert calls.count("agent_start") == 1
        unsubscribe()
        unsubscribe_again()  # harmless
        calls.clear()
        other.clear()
        await agent.prompt("again")
        assert calls == []
        assert other and other[0] == "agent_start"


async def test_reducer_state_at_listener_time(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(
            stream_fn=ScriptedModel(
                [
                    Response(
                        content=[ScriptedText(["Let me ", "check"]), ScriptedToolCall("c1", "echo", {"text": "x"})]
                    ),
                    "done",
                ]
            ),
            tools=[echo_tool()],
        )
        problems: list[str] = []
        pending_seen: list[frozenset[str]] = []

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            state = agent.state
            if isinstance(event, (MessageStart, MessageUpdate)):
                if state.streaming_message is not event.message:
                    problems.append(f"streaming_message at {event.type}")
            elif isinstance(event, MessageEnd):
                if state.streaming_message is not None:
                    problems.append("streaming_message after message_end")
                if state.messages[-1] is not event.message:
                    problems.append("message_end not appended before listeners")
            elif isinstance(event, ToolExecutionStart):
                pending_seen.append(state.pending_tool_calls)
                if event.tool_call_id not in state.pending_tool_calls:
                    problems.append("pending_tool_calls missing the started call")
            elif isinstance(event, ToolExecutionEnd):
                if event.tool_call_id in state.pending_tool_calls:
                    problems.append("pending_tool_calls keeps the ended call")
            elif isinstance(event, AgentEnd) and state.streaming_message is not None:
                problems.append("streaming_message at agent_end")
            if not state.is_streaming:
                problems.append(f"is_streaming False at {event.type}")

        agent.subscribe(listener)
        await agent.prompt("go")
        assert problems == []
        assert pending_seen == [frozenset({"c1"})]
        assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
        assert agent.state.is_streaming is False
        assert agent.state.streaming_message is None
        assert agent.state.pending_tool_calls == frozenset()
        assert agent.state.error_message is None
        assert agent.signal is None


# --- the barrier -----------------------------------------------------------------------------


async def test_barrier_slow_listener_finishes_before_before_tool_call(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        log: list[str] = []
        seen_in_hook: list[list[str]] = []

        def before_tool_call(ctx: BeforeToolCallContext, signal: AbortSignal) -> None:
            log.append("before_tool_call")
            seen_in_hook.append(roles(agent.state.messages))
            assert ctx.assistant_message in agent.state.messages
            assert agent.state.messages[-1] is ctx.assistant_message

        pending_during_execute: list[frozenset[str]] = []

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            log.append("execute")
            pending_during_execute.append(agent.state.pending_tool_calls)
            return AgentToolResult.from_text("ok")

        slow = AgentTool(name="slow", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        agent = Agent(
            stream_fn=ScriptedModel([tool_call_response(("c1", "slow", {})), "done"]),
            tools=[slow],
            before_tool_call=before_tool_call,
        )

        async def slow_listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageEnd) and event.message.role == "assistant" and not log:
                log.append("listener start")
                await anyio.sleep(0.05)
                log.append("listener end")

        agent.subscribe(slow_listener)
        await agent.prompt("go")
        assert log == ["listener start", "listener end", "before_tool_call", "execute"]
        assert seen_in_hook == [["user", "assistant"]]
        assert pending_during_execute == [frozenset({"c1"})]
        assert agent.state.pending_tool_calls == frozenset()


async def test_is_streaming_true_during_agent_end_listeners(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel(["ok"]))
        seen: list[tuple[bool, bool]] = []

        async def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, AgentEnd):
                await anyio.sleep(0.01)
                seen.append((agent.state.is_streaming, agent.signal is signal))

        agent.subscribe(listener)
        await agent.prompt("hi")
        assert seen == [(True, True)]
        assert agent.state.is_streaming is False
        assert agent.signal is None


async def test_tool_execution_end_waits_for_update_listeners(anyio_backend: object) -> None:
    """tool_execution_end comes after the listeners of the tool's updates have finished."""
    with anyio.fail_after(5):
        log: list[str] = []

        @tool
        async def progress(on_update: Any) -> str:
            """Report progress."""
            await on_update(AgentToolResult.from_text("half"))
            log.append("tool returned")
            return "done"

        agent = Agent(stream_fn=ScriptedModel([tool_call_response(("c1", "progress", {})), "fin"]), tools=[progress])

        async def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if event.type == "tool_execution_update":
                await anyio.sleep(0.02)
                log.append("update listener done")
            elif event.type == "tool_execution_end":
                log.append("end")

        agent.subscribe(listener)
        await agent.prompt("go")
        assert log == ["update listener done", "tool returned", "end"]
        result = agent.state.messages[2]
        assert isinstance(result, ToolResultMessage)
        assert text_of(result) == "done"


# --- busy errors and reset -------------------------------------------------------------------


async def test_busy_errors_while_running(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        started = anyio.Event()
        release = anyio.Event()

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            started.set()
            await release.wait()
            return AgentToolResult.from_text("released")

        blocker = AgentTool(name="block", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        model = ScriptedModel([tool_call_response(("c1", "block", {})), "done"])
        agent = Agent(stream_fn=model, tools=[blocker])
        agent.steer(user("queued"))
        agent.clear_all_queues()
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "first")
            await started.wait()
            assert agent.state.is_streaming is True
            assert isinstance(agent.signal, AbortSignal)
            with pytest.raises(AgentBusyError, match=re.escape(PROMPT_BUSY)) as prompt_error:
                await agent.prompt("second")
            assert str(prompt_error.value) == PROMPT_BUSY
            with pytest.raises(AgentBusyError) as continue_error:
                await agent.continue_()
            assert str(continue_error.value) == CONTINUE_BUSY
            with pytest.raises(AgentBusyError) as reset_error:
                agent.reset()
            assert str(reset_error.value) == RESET_BUSY
            # The failed calls changed nothing.
            assert roles(agent.state.messages) == ["user", "assistant"]
            assert agent.state.is_streaming is True
            release.set()
        assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
        assert [text_of(m) for m in agent.state.messages if m.role == "user"] == ["first"]
        assert len(model.calls) == 2
        assert agent.state.error_message is None


async def test_busy_error_is_runtime_error(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        errors: list[BaseException] = []
        agent = Agent(stream_fn=ScriptedModel(["ok", "never"]))

        async def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, AgentEnd):
                # Re-entrant prompt from an agent_end listener is rejected (0.73.1).
                try:
                    await agent.prompt("re-entrant")
                except AgentBusyError as exc:
                    errors.append(exc)

        agent.subscribe(listener)
        await agent.prompt("hi")
        assert len(errors) == 1
        assert isinstance(errors[0], RuntimeError)
        assert str(errors[0]) == PROMPT_BUSY
        assert roles(agent.state.messages) == ["user", "assistant"]


async def test_reset_when_idle(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel([Response(content=["x"], stop_reason="error", error_message="bad")]))
        await agent.prompt("hi")
        assert agent.state.error_message == "bad"
        assert len(agent.state.messages) == 2
        agent.steer(user("s"))
        agent.follow_up(user("f"))
        tools = [echo_tool()]
        agent.state.tools = tools
        agent.reset()
        state = agent.state  # read afresh: mypy would keep what it narrowed before the reset
        assert state.messages == []
        assert state.error_message is None
        assert agent.has_queued_messages() is False
        assert state.is_streaming is False
        assert state.streaming_message is None
        assert state.pending_tool_calls == frozenset()
        # The configuration is kept.
        assert state.tools == tools


async def test_error_message_cleared_when_next_run_starts(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(
            stream_fn=ScriptedModel([Response(content=["x"], stop_reason="error", error_message="bad"), "good"])
        )
        await agent.prompt("one")
        assert agent.state.error_message == "bad"
        assert as_assistant(agent.state.messages[-1]).stop_reason == "error"
        seen: list[str | None] = []
        agent.subscribe(lambda e, s: seen.append(agent.state.error_message) if e.type == "agent_start" else None)
        await agent.prompt("two")
        assert seen == [None]
        assert agent.state.error_message is None


# --- continue_ -------------------------------------------------------------------------------


async def test_continue_without_messages(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["unused"])
        agent = Agent(stream_fn=model)
        with pytest.raises(InvalidContextError) as info:
            await agent.continue_()
        assert str(info.value) == "No messages to continue from"
        assert isinstance(info.value, ValueError)
        assert model.calls == []
        assert agent.state.is_streaming is False


async def test_continue_from_assistant_tail_with_nothing_queued(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["unused"])
        agent = Agent(stream_fn=model, messages=[user("Initial"), assistant("Initial response")])
        events = record(agent)
        with pytest.raises(InvalidContextError) as info:
            await agent.continue_()
        assert str(info.value) == "Cannot continue from message role: assistant"
        assert events == []
        assert model.calls == []
        assert len(agent.state.messages) == 2
        assert agent.signal is None


async def test_continue_runs_queued_steering_one_at_a_time(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["Processed 1", "Processed 2"])
        agent = Agent(stream_fn=model, messages=[user("Initial"), assistant("Initial response")])
        s1, s2 = user("Steering 1"), user("Steering 2")
        agent.steer(s1)
        agent.steer(s2)
        events = record(agent)
        await agent.continue_()
        assert len(model.calls) == 2
        assert roles(agent.state.messages[-4:]) == ["user", "assistant", "user", "assistant"]
        assert agent.state.messages[2] is s1
        assert agent.state.messages[4] is s2
        assert [m.text for m in agent.state.messages if isinstance(m, AssistantMessage)][1:] == [
            "Processed 1",
            "Processed 2",
        ]
        assert model.calls[0].messages[-1] is s1
        assert model.calls[1].messages[-1] is s2
        assert agent.has_queued_messages() is False
        check_events(events)


async def test_continue_runs_queued_steering_all(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["Processed both"])
        agent = Agent(stream_fn=model, messages=[user("Initial"), assistant("Initial response")], steering_mode="all")
        s1, s2 = user("Steering 1"), user("Steering 2")
        agent.steer(s1)
        agent.steer(s2)
        await agent.continue_()
        assert len(model.calls) == 1
        assert agent.state.messages[2:4] == [s1, s2]
        assert roles(agent.state.messages) == ["user", "assistant", "user", "user", "assistant"]


async def test_continue_runs_queued_follow_up(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["Processed"])
        agent = Agent(stream_fn=model, messages=[user("Initial"), assistant("Initial response")])
        follow = user("Queued follow-up")
        agent.follow_up(follow)
        result = await agent.continue_()  # type: ignore[func-returns-value]  # what it returns is checked
        assert result is None
        assert any(m.role == "user" and text_of(m) == "Queued follow-up" for m in agent.state.messages)
        assert agent.state.messages[-1].role == "assistant"
        assert agent.state.messages[-2] is follow
        assert len(model.calls) == 1
        assert agent.has_queued_messages() is False


async def test_continue_steering_before_follow_ups(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["after steer", "after follow-up"])
        agent = Agent(stream_fn=model, messages=[user("Initial"), assistant("Initial response")])
        steer, follow = user("steer"), user("follow")
        agent.follow_up(follow)
        agent.steer(steer)
        await agent.continue_()
        assert len(model.calls) == 2
        assert agent.state.messages[2] is steer
        assert agent.state.messages[4] is follow
        assert roles(agent.state.messages) == ["user", "assistant", "user", "assistant", "user", "assistant"]


async def test_continue_from_user_tail(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["answer"])
        first = user("question")
        agent = Agent(stream_fn=model, messages=[first])
        events = record(agent)
        await agent.continue_()
        assert len(model.calls) == 1
        assert model.calls[0].messages == (first,)
        started = [e.message.role for e in events if isinstance(e, MessageStart)]
        assert started == ["assistant"]  # the user message is not re-emitted
        assert types(events)[:2] == ["agent_start", "turn_start"]
        end = events[-1]
        assert isinstance(end, AgentEnd)
        assert roles(end.messages) == ["assistant"]
        assert agent.state.messages[0] is first
        assert roles(agent.state.messages) == ["user", "assistant"]
        assert as_assistant(agent.state.messages[1]).text == "answer"
        check_events(events)


async def test_continue_from_tool_result_tail(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["after result"])
        call_message = AssistantMessage(content=(), api="a", provider="p", model="m", stop_reason="toolUse")
        result = ToolResultMessage(tool_call_id="c1", tool_name="echo", content=(TextContent("r"),))
        agent = Agent(stream_fn=model, messages=[user("q"), call_message, result])
        await agent.continue_()
        assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]
        assert model.calls[0].messages[-1] is result


# --- steering and follow-ups during a run ----------------------------------------------------


async def test_steer_and_follow_up_during_run(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([tool_call_response(("c1", "echo", {"text": "a"})), "after steer", "after follow-up"])
        agent = Agent(stream_fn=model, tools=[echo_tool()])
        steer, follow = user("steer now"), user("follow later")

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, ToolExecutionStart):
                agent.steer(steer)
                agent.follow_up(follow)
                assert agent.has_queued_messages()
                assert agent.peek_queued_messages() == [steer]

        events = record(agent)
        agent.subscribe(listener)
        await agent.prompt("go")
        assert roles(agent.state.messages) == [
            "user",
            "assistant",
            "toolResult",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert agent.state.messages[3] is steer
        assert agent.state.messages[5] is follow
        assert len(model.calls) == 3
        assert model.calls[1].messages[-1] is steer
        assert model.calls[1].messages[-2].role == "toolResult"
        assert model.calls[2].messages[-1] is follow
        assert agent.has_queued_messages() is False
        # The steering message is delivered in a new turn, after the tool turn ended.
        kinds = types(events)
        steer_start = next(i for i, e in enumerate(events) if isinstance(e, MessageStart) and e.message is steer)
        assert kinds[steer_start - 1] == "turn_start"
        assert kinds[steer_start - 2] == "turn_end"
        check_events(events)


@pytest.mark.parametrize(("mode", "calls"), [("one-at-a-time", 3), ("all", 2)])
async def test_steering_mode_during_run(
    anyio_backend: object, mode: Literal["all", "one-at-a-time"], calls: int
) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([tool_call_response(("c1", "echo", {"text": "a"})), "r2", "r3"])
        agent = Agent(stream_fn=model, tools=[echo_tool()], steering_mode=mode)
        s1, s2 = user("s1"), user("s2")

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, ToolExecutionStart):
                agent.steer(s1)
                agent.steer(s2)

        agent.subscribe(listener)
        await agent.prompt("go")
        assert len(model.calls) == calls
        if mode == "all":
            assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "user", "user", "assistant"]
            assert agent.state.messages[3:5] == [s1, s2]
        else:
            assert roles(agent.state.messages) == [
                "user",
                "assistant",
                "toolResult",
                "user",
                "assistant",
                "user",
                "assistant",
            ]
            assert agent.state.messages[3] is s1
            assert agent.state.messages[5] is s2
        assert as_assistant(agent.state.messages[-1]).stop_reason == "stop"
        assert agent.has_queued_messages() is False


@pytest.mark.parametrize(("mode", "calls"), [("one-at-a-time", 3), ("all", 2)])
async def test_follow_up_mode_during_run(
    anyio_backend: object, mode: Literal["all", "one-at-a-time"], calls: int
) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["r1", "r2", "r3"])
        agent = Agent(stream_fn=model, follow_up_mode=mode)
        f1, f2 = user("f1"), user("f2")

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageEnd) and event.message.role == "user" and text_of(event.message) == "go":
                agent.follow_up(f1)
                agent.follow_up(f2)

        agent.subscribe(listener)
        await agent.prompt("go")
        assert len(model.calls) == calls
        if mode == "all":
            assert roles(agent.state.messages) == ["user", "assistant", "user", "user", "assistant"]
            assert agent.state.messages[2:4] == [f1, f2]
        else:
            assert roles(agent.state.messages) == ["user", "assistant", "user", "assistant", "user", "assistant"]
            assert agent.state.messages[2] is f1
            assert agent.state.messages[4] is f2
        assert as_assistant(agent.state.messages[-1]).stop_reason == "stop"


async def test_steering_queued_before_prompt_is_delivered_first_turn(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["answer"])
        agent = Agent(stream_fn=model)
        steer = user("steer early")
        agent.steer(steer)
        await agent.prompt("hi")
        assert len(model.calls) == 1
        assert roles(agent.state.messages) == ["user", "user", "assistant"]
        assert agent.state.messages[1] is steer
        assert model.calls[0].messages[-1] is steer


async def test_queue_mode_change_mid_run_applies_at_next_poll(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([tool_call_response(("c1", "echo", {"text": "a"})), "r2", "r3"])
        agent = Agent(stream_fn=model, tools=[echo_tool()], steering_mode="all")
        s1, s2 = user("s1"), user("s2")

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, ToolExecutionStart):
                agent.steer(s1)
                agent.steer(s2)
                agent.steering_mode = "one-at-a-time"

        agent.subscribe(listener)
        await agent.prompt("go")
        assert len(model.calls) == 3
        assert agent.state.messages[3] is s1
        assert agent.state.messages[5] is s2


# --- stream options and run configuration ----------------------------------------------------


class RecordingStream:
    """Wraps a ScriptedModel and records the model and options of every call."""

    def __init__(self, responses: Sequence[Any]) -> None:
        self.scripted = ScriptedModel(responses)
        self.models: list[Model] = []
        self.options: list[StreamOptions] = []

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> Any:
        self.models.append(model)
        self.options.append(options)
        return self.scripted(model, context, options)


async def test_stream_options_forwarded(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        stream = RecordingStream(["one", "two", "three"])
        keys: list[str] = []

        async def get_api_key(provider: str) -> str:
            keys.append(provider)
            return "secret"

        model = Model(id="m1", provider="prov", api="api")
        agent = Agent(model=model, stream_fn=stream, session_id="session-abc", get_api_key=get_api_key)
        await agent.prompt("hello")
        assert stream.options[0].session_id == "session-abc"
        assert stream.options[0].reasoning is None  # thinking_level "off"
        assert stream.options[0].api_key == "secret"
        assert keys == ["prov"]
        assert stream.models[0] is model

        agent.options = agent.options.replace(session_id="session-def")
        agent.state.thinking_level = "high"
        await agent.prompt("hello again")
        assert stream.options[1].session_id == "session-def"
        assert stream.options[1].reasoning == "high"


async def test_state_changes_mid_run_apply_to_next_run(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        stream = RecordingStream([tool_call_response(("c1", "echo", {"text": "a"})), "r2", "r3"])
        first = Model(id="first", provider="p", api="a")
        second = Model(id="second", provider="p", api="a")
        agent = Agent(model=first, stream_fn=stream, tools=[echo_tool()])

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if event.type == "agent_start" and agent.state.model is first:
                agent.state.model = second
                agent.state.thinking_level = "low"

        agent.subscribe(listener)
        await agent.prompt("go")
        assert stream.models == [first, first]
        assert [o.reasoning for o in stream.options] == [None, None]
        await agent.prompt("next")
        assert stream.models[2] is second
        assert stream.options[2].reasoning == "low"


# --- run failures ----------------------------------------------------------------------------


def assert_failure_tail(events: Sequence[AgentEvent], agent: Agent, reason: str, message: str) -> AssistantMessage:
    """The run ended with the failure message's message_start, message_end, turn_end, agent_end."""
    assert types(events[-4:]) == ["message_start", "message_end", "turn_end", "agent_end"]
    start, message_end, turn_end, run_end = events[-4:]
    assert isinstance(start, MessageStart) and isinstance(message_end, MessageEnd)
    assert isinstance(turn_end, TurnEnd) and isinstance(run_end, AgentEnd)
    failure = start.message
    assert isinstance(failure, AssistantMessage)
    assert message_end.message is failure
    assert turn_end.message is failure
    assert list(turn_end.tool_results) == []
    assert list(run_end.messages) == [failure]
    assert failure.stop_reason == reason
    assert failure.error_message == message
    assert failure.content == (TextContent(""),)
    assert agent.state.error_message == message
    assert agent.state.messages[-1] is failure
    assert sum(1 for m in agent.state.messages if m is failure) == 1
    assert agent.state.is_streaming is False
    assert agent.state.streaming_message is None
    assert agent.state.pending_tool_calls == frozenset()
    assert agent.signal is None
    return failure


async def test_stream_function_raising(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model_info = Model(id="m-1", api="my-api", provider="my-provider")
        agent = Agent(model=model_info, stream_fn=ScriptedModel([Response(raise_on_call=RuntimeError("boom"))]))
        events = record(agent)
        await agent.prompt("hi")  # does not raise
        failure = assert_failure_tail(events, agent, "error", "boom")
        assert (failure.api, failure.provider, failure.model) == ("my-api", "my-provider", "m-1")
        assert types(events[:4]) == ["agent_start", "turn_start", "message_start", "message_end"]
        assert not any(isinstance(e, MessageUpdate) for e in events)
        assert roles(agent.state.messages) == ["user", "assistant"]


async def test_stream_iterator_raising_mid_stream(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        response = Response(content=[ScriptedText(["a", "b", "c"])], raise_on_call=ValueError("mid"), raise_after=3)
        agent = Agent(stream_fn=ScriptedModel([response]))
        events = record(agent)
        await agent.prompt("hi")
        assert_failure_tail(events, agent, "error", "mid")
        # The partial message streamed before the failure was never ended.
        assert [m.role for m in agent.state.messages] == ["user", "assistant"]


async def test_exception_without_message_uses_type_name(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel([Response(raise_on_call=RuntimeError())]))
        events = record(agent)
        await agent.prompt("hi")
        assert_failure_tail(events, agent, "error", "RuntimeError")


async def test_listener_raising(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        executed: list[str] = []

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            executed.append(tool_call_id)
            return AgentToolResult.from_text("ok")

        t = AgentTool(name="t", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        model = ScriptedModel([tool_call_response(("c1", "t", {})), "never"])
        agent = Agent(stream_fn=model, tools=[t])
        events = record(agent)

        def bad_listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, ToolExecutionStart):
                raise ValueError("listener broke")

        agent.subscribe(bad_listener)
        await agent.prompt("go")  # does not raise
        assert_failure_tail(events, agent, "error", "listener broke")
        assert executed == []
        assert len(model.calls) == 1
        assert roles(agent.state.messages) == ["user", "assistant", "assistant"]


async def test_convert_to_llm_raising(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel(["never"])

        async def convert(messages: Sequence[Any]) -> list[Any]:
            raise KeyError("no conversion")

        agent = Agent(stream_fn=model, convert_to_llm=convert)
        events = record(agent)
        await agent.prompt("hi")
        assert_failure_tail(events, agent, "error", str(KeyError("no conversion")))
        assert model.calls == []


async def test_failure_after_abort_is_aborted(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel([Response(raise_on_call=RuntimeError("after abort"))]))
        events = record(agent)

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageEnd) and event.message.role == "user":
                agent.abort()
                assert signal.aborted

        agent.subscribe(listener)
        await agent.prompt("hi")
        assert_failure_tail(events, agent, "aborted", "after abort")


async def test_failed_agent_can_run_again(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel([Response(raise_on_call=RuntimeError("boom")), "recovered"]))
        await agent.prompt("one")
        assert agent.state.error_message == "boom"
        await agent.prompt("two")
        state = agent.state  # read afresh: mypy would keep what it narrowed before this run
        assert state.error_message is None
        assert as_assistant(state.messages[-1]).text == "recovered"


async def test_error_response_sets_error_message(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(
            stream_fn=ScriptedModel([Response(content=["partial"], stop_reason="error", error_message="rate limited")])
        )
        events = record(agent)
        await agent.prompt("hi")
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "error"
        assert agent.state.error_message == "rate limited"
        check_events(events)


# --- abort -----------------------------------------------------------------------------------


async def test_abort_during_streaming_from_listener(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([Response(content=[ScriptedText(["Hel", "lo ", "world"])], chunk_delay=0.01)])
        agent = Agent(stream_fn=model)
        events = record(agent)

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageUpdate) and event.assistant_message_event.type == "text_delta":
                agent.abort()

        agent.subscribe(listener)
        await agent.prompt("hi")
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "aborted"
        assert last.error_message == "Request was aborted"
        assert last.text == "Hel"
        assert agent.state.error_message == "Request was aborted"
        assert types(events[-3:]) == ["message_end", "turn_end", "agent_end"]
        assert agent.signal is None
        check_events(events)


async def test_abort_during_streaming_from_another_task(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([Response(content=[ScriptedText(["a", "b", "c", "d"])], chunk_delay=0.5)])
        agent = Agent(stream_fn=model)
        events = record(agent)
        first_delta = anyio.Event()

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageUpdate) and event.assistant_message_event.type == "text_delta":
                first_delta.set()

        agent.subscribe(listener)
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "hi")
            await first_delta.wait()
            signal = agent.signal
            assert isinstance(signal, AbortSignal)
            start = anyio.current_time()
            agent.abort()
            assert signal.aborted
            await agent.wait_for_idle()
            elapsed = anyio.current_time() - start
        assert elapsed < 0.3  # the chunk wait was interrupted, not waited out
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "aborted"
        assert last.error_message == "Request was aborted"
        assert last.text == "a"
        assert agent.signal is None
        assert agent.state.is_streaming is False
        check_events(events)


async def test_abort_slow_tool_ignoring_signal_is_bounded(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        started = anyio.Event()
        finished_normally: list[bool] = []

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            started.set()
            await anyio.sleep(10)  # ignores the signal
            finished_normally.append(True)
            return AgentToolResult.from_text("too late")

        slow = AgentTool(name="slow", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        model = ScriptedModel([tool_call_response(("c1", "slow", {})), "never"])
        agent = Agent(stream_fn=model, tools=[slow], tool_abort_grace=0.05)
        events = record(agent)
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "go")
            await started.wait()
            start = anyio.current_time()
            agent.abort()
            await agent.wait_for_idle()
            elapsed = anyio.current_time() - start
        assert 0.04 <= elapsed < 1.0
        assert finished_normally == []
        result = agent.state.messages[2]
        assert isinstance(result, ToolResultMessage)
        assert result.is_error is True
        assert text_of(result) == "Operation aborted"
        ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
        assert len(ends) == 1 and ends[0].is_error is True
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "aborted"
        assert agent.state.is_streaming is False
        assert agent.signal is None
        check_events(events)


async def test_abort_tool_honouring_signal_keeps_its_result(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        started = anyio.Event()

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            started.set()
            await signal.wait()
            return AgentToolResult(content=(TextContent("stopped cleanly"),), is_error=True)

        polite = AgentTool(name="polite", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        agent = Agent(
            stream_fn=ScriptedModel([tool_call_response(("c1", "polite", {})), "never"]),
            tools=[polite],
            tool_abort_grace=2.0,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "go")
            await started.wait()
            start = anyio.current_time()
            agent.abort()
        assert anyio.current_time() - start < 1.0
        result = agent.state.messages[2]
        assert isinstance(result, ToolResultMessage)
        assert text_of(result) == "stopped cleanly"
        assert result.is_error is True
        assert as_assistant(agent.state.messages[-1]).stop_reason == "aborted"


async def test_abort_before_streaming(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(stream_fn=ScriptedModel([Response(content=["never"], delay=10)]))
        events = record(agent)

        def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if event.type == "agent_start":
                agent.abort()

        agent.subscribe(listener)
        await agent.prompt("hi")
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "aborted"
        assert last.error_message == "Request was aborted"
        assert last.text == ""
        assert roles(agent.state.messages) == ["user", "assistant"]
        assert agent.state.error_message == "Request was aborted"
        check_events(events)


async def test_signal_during_run_and_idle(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        seen: list[AbortSignal | None] = []

        @tool
        async def peek() -> str:
            """Look at the agent's signal."""
            seen.append(agent.signal)
            return "ok"

        agent = Agent(stream_fn=ScriptedModel([tool_call_response(("c1", "peek", {})), "done"]), tools=[peek])
        assert agent.signal is None
        await agent.prompt("go")
        assert len(seen) == 1
        assert isinstance(seen[0], AbortSignal)
        assert seen[0].aborted is False
        assert agent.signal is None
        agent.abort()  # idle: no-op
        assert seen[0].aborted is False
        assert as_assistant(agent.state.messages[-1]).stop_reason == "stop"


# --- wait_for_idle ---------------------------------------------------------------------------


async def test_wait_for_idle_after_non_awaited_prompt(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        agent = Agent(
            stream_fn=ScriptedModel(
                [tool_call_response(("c1", "echo", {"text": "x"}), delay=0.02), Response(content=["final"], delay=0.02)]
            ),
            tools=[echo_tool()],
        )
        running = anyio.Event()
        log: list[str] = []

        async def listener(event: AgentEvent, signal: AbortSignal) -> None:
            if event.type == "agent_start":
                running.set()
            elif isinstance(event, AgentEnd):
                await anyio.sleep(0.02)
                log.append("agent_end listener done")

        agent.subscribe(listener)
        await agent.wait_for_idle()  # idle: returns at once
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.prompt, "go")
            await running.wait()
            assert agent.state.is_streaming is True
            await agent.wait_for_idle()
            log.append("idle")
            state = agent.state  # read afresh: mypy would keep what it narrowed before the run ended
            assert state.is_streaming is False
            assert agent.signal is None
            assert roles(state.messages) == ["user", "assistant", "toolResult", "assistant"]
            assert as_assistant(state.messages[-1]).text == "final"
            assert state.streaming_message is None
            assert state.pending_tool_calls == frozenset()
            assert state.error_message is None
        assert log == ["agent_end listener done", "idle"]


# --- cancellation ----------------------------------------------------------------------------


async def test_cancelling_prompt_caller_leaves_agent_idle(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        started = anyio.Event()
        cancelled: list[bool] = []

        async def execute(tool_call_id: str, params: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
            started.set()
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise
            return AgentToolResult.from_text("never")

        sleeper = AgentTool(name="sleeper", description="d", parameters=EMPTY_SCHEMA, execute=execute)
        model = ScriptedModel([tool_call_response(("c1", "sleeper", {})), "after restart"])
        agent = Agent(stream_fn=model, tools=[sleeper])
        with anyio.move_on_after(0.1) as scope:
            await agent.prompt("go")
        assert scope.cancelled_caught
        assert started.is_set()
        assert cancelled == [True]
        assert agent.state.is_streaming is False
        assert agent.signal is None
        assert agent.state.pending_tool_calls == frozenset()
        assert agent.state.streaming_message is None
        await agent.wait_for_idle()  # returns at once

        await agent.prompt("again")
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.text == "after restart"
        assert last.stop_reason == "stop"
        assert len(model.calls) == 2


async def test_cancelling_during_streaming_leaves_agent_idle(anyio_backend: object) -> None:
    with anyio.fail_after(5):
        model = ScriptedModel([Response(content=["slow"], delay=10), "second"])
        agent = Agent(stream_fn=model)
        with anyio.move_on_after(0.05) as scope:
            await agent.prompt("go")
        assert scope.cancelled_caught
        assert agent.state.is_streaming is False
        assert agent.signal is None
        assert agent.state.error_message is None
        await agent.prompt("again")
        assert as_assistant(agent.state.messages[-1]).text == "second"


# --- the event grammar -----------------------------------------------------------------------


async def test_check_events_full_run_with_tools(anyio_backend: object) -> None:
    with anyio.fail_after(5):

        @tool
        async def add(a: int, b: int) -> str:
            """Add two integers."""
            await anyio.sleep(0.01)
            return str(a + b)

        model = ScriptedModel(
            [
                Response(
                    content=[
                        ScriptedText(["Adding ", "twice"]),
                        ScriptedToolCall("c1", "add", {"a": 1, "b": 2}),
                        ScriptedToolCall("c2", "add", {"a": "3", "b": 4}),
                        ScriptedToolCall("c3", "missing", {}),
                    ]
                ),
                Response(content=[ScriptedToolCall("c4", "echo", {"text": "hi"})]),
                Response(content=[ScriptedText(["3 ", "and 7"])]),
            ]
        )
        agent = Agent(stream_fn=model, tools=[add, echo_tool()], system_prompt="Be exact.")
        events = record(agent)
        await agent.prompt("add things")
        check_events(events)
        assert isinstance(events[-1], AgentEnd)
        assert list(events[-1].messages) == agent.state.messages
        assert roles(agent.state.messages) == [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
        ]
        results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
        assert [text_of(r) for r in results] == ["3", "7", "Tool missing not found", "echo hi"]
        assert [r.is_error for r in results] == [False, False, True, False]
        assert as_assistant(agent.state.messages[-1]).text == "3 and 7"
        assert model.calls[0].system_prompt == "Be exact."
        turn_ends = [e for e in events if isinstance(e, TurnEnd)]
        assert len(turn_ends) == 3
        assert agent.state.error_message is None


@pytest.mark.parametrize("listener_kind", ["plain", "async"])
async def test_a_listener_failing_on_a_progress_update_fails_the_run_not_the_tool(
    anyio_backend: object, listener_kind: str
) -> None:
    # As on every other event: the run fails (an error message, state.error_message), and the
    # failure is not handed to the tool as if its own `on_update` call had raised.
    seen_by_tool: list[str] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        try:
            on_update(AgentToolResult.from_text("half way"))
        except Exception as exc:  # pragma: no cover - the failure this test guards against
            seen_by_tool.append(repr(exc))
            raise
        await anyio.sleep(0.05)
        return AgentToolResult.from_text("done")

    tool = AgentTool(name="work", description="", parameters={"type": "object"}, execute=execute)

    def plain(event: AgentEvent, signal: Any) -> None:
        if event.type == "tool_execution_update":
            raise RuntimeError("listener exploded")

    async def asynchronous(event: AgentEvent, signal: Any) -> None:
        plain(event, signal)

    model = ScriptedModel([tool_call_response(("c1", "work", {})), "never reached"])
    agent = Agent(tools=[tool], stream_fn=model)
    agent.subscribe(plain if listener_kind == "plain" else asynchronous)
    with anyio.fail_after(5):
        await agent.prompt("go")
    assert seen_by_tool == []
    assert agent.state.error_message is not None and "listener exploded" in agent.state.error_message
    assert len(model.calls) == 1


async def test_cache_retention_reaches_the_stream_function(anyio_backend: object) -> None:
    seen: list[StreamOptions] = []
    model = ScriptedModel(["done"])

    def stream(m: Model, context: Context, options: StreamOptions) -> Any:
        seen.append(options)
        return model(m, context, options)

    agent = Agent(model=Model(id="m", api="faux", provider="faux"), stream_fn=stream, cache_retention="long")
    await agent.prompt("hi")
    assert [o.cache_retention for o in seen] == ["long"]
