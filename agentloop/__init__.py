"""agentloop: a stateful LLM agent with tool execution and a typed event stream, on anyio.

A Python port of pi-agent-core: `agent_loop` streams a run's events, `run_agent_loop` awaits a
sink for each of them, and `Agent` keeps the state, the listeners and the message queues.
Runs on asyncio and on trio.

This namespace holds what a run needs: the loop, the Agent, messages, events, tools, options,
errors and the stream-function types. The rest lives in namespaces of its own:
`agentloop.providers` (model APIs), `agentloop.sessions` (transcripts kept on disk),
`agentloop.wire` (JSON forms, envelopes, the compact event form), `agentloop.serve` (agents over
HTTP), `agentloop.approvals`, `agentloop.context`, `agentloop.output`, `agentloop.sync`,
`agentloop.testing`, and the integrations (`mcp`, `otel`, `temporal`, `dbos`).
"""

from ._core._agent import DEFAULT_MODEL as DEFAULT_MODEL
from ._core._agent import Agent as Agent
from ._core._agent import AgentListener as AgentListener
from ._core._config import AfterToolCallContext as AfterToolCallContext
from ._core._config import AfterToolCallResult as AfterToolCallResult
from ._core._config import AgentContext as AgentContext
from ._core._config import AgentLoopConfig as AgentLoopConfig
from ._core._config import BeforeToolCallContext as BeforeToolCallContext
from ._core._config import BeforeToolCallResult as BeforeToolCallResult
from ._core._config import LoopOptions as LoopOptions
from ._core._config import NextTurn as NextTurn
from ._core._config import QueueMode as QueueMode
from ._core._config import ToolExecution as ToolExecution
from ._core._config import ToolInvocation as ToolInvocation
from ._core._config import TurnContext as TurnContext
from ._core._config import default_convert_to_llm as default_convert_to_llm
from ._core._default_stream import register_api_provider as register_api_provider
from ._core._loop import run_agent_loop as run_agent_loop
from ._core._loop import run_agent_loop_continue as run_agent_loop_continue
from ._core._state import AgentState as AgentState
from ._core._stream import AgentEventStream as AgentEventStream
from ._core._stream import AgentLoopStream as AgentLoopStream
from ._core._stream import agent_loop as agent_loop
from ._core._stream import agent_loop_continue as agent_loop_continue
from ._tools._decorator import tool as tool
from ._tools._tool import AgentTool as AgentTool
from ._tools._tool import within_timeout as within_timeout
from ._types._abort import AbortSignal as AbortSignal
from ._types._builder import AssistantMessageBuilder as AssistantMessageBuilder
from ._types._errors import AgentBusyError as AgentBusyError
from ._types._errors import AgentLoopError as AgentLoopError
from ._types._errors import InvalidContextError as InvalidContextError
from ._types._errors import ToolError as ToolError
from ._types._errors import ToolTimeoutError as ToolTimeoutError
from ._types._events import AgentEnd as AgentEnd
from ._types._events import AgentEvent as AgentEvent
from ._types._events import AgentStart as AgentStart
from ._types._events import AssistantMessageEvent as AssistantMessageEvent
from ._types._events import DoneEvent as DoneEvent
from ._types._events import ErrorEvent as ErrorEvent
from ._types._events import MessageEnd as MessageEnd
from ._types._events import MessageStart as MessageStart
from ._types._events import MessageUpdate as MessageUpdate
from ._types._events import StartEvent as StartEvent
from ._types._events import TextDeltaEvent as TextDeltaEvent
from ._types._events import TextEndEvent as TextEndEvent
from ._types._events import TextStartEvent as TextStartEvent
from ._types._events import ThinkingDeltaEvent as ThinkingDeltaEvent
from ._types._events import ThinkingEndEvent as ThinkingEndEvent
from ._types._events import ThinkingStartEvent as ThinkingStartEvent
from ._types._events import ToolCallDeltaEvent as ToolCallDeltaEvent
from ._types._events import ToolCallEndEvent as ToolCallEndEvent
from ._types._events import ToolCallStartEvent as ToolCallStartEvent
from ._types._events import ToolExecutionEnd as ToolExecutionEnd
from ._types._events import ToolExecutionStart as ToolExecutionStart
from ._types._events import ToolExecutionUpdate as ToolExecutionUpdate
from ._types._events import TurnEnd as TurnEnd
from ._types._events import TurnStart as TurnStart
from ._types._messages import AgentMessage as AgentMessage
from ._types._messages import AgentToolResult as AgentToolResult
from ._types._messages import AssistantMessage as AssistantMessage
from ._types._messages import Context as Context
from ._types._messages import Cost as Cost
from ._types._messages import CustomMessage as CustomMessage
from ._types._messages import ImageContent as ImageContent
from ._types._messages import Message as Message
from ._types._messages import Model as Model
from ._types._messages import ModelCost as ModelCost
from ._types._messages import StopReason as StopReason
from ._types._messages import TextContent as TextContent
from ._types._messages import ThinkingContent as ThinkingContent
from ._types._messages import ThinkingLevel as ThinkingLevel
from ._types._messages import ToolCall as ToolCall
from ._types._messages import ToolResultMessage as ToolResultMessage
from ._types._messages import Usage as Usage
from ._types._messages import UserMessage as UserMessage
from ._types._stream_fn import StreamFn as StreamFn
from ._types._stream_fn import StreamOptions as StreamOptions

__version__ = "0.1.0"

__all__ = (
    "DEFAULT_MODEL",
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentEventStream",
    "AgentListener",
    "AgentLoopConfig",
    "AgentLoopError",
    "AgentLoopStream",
    "AgentMessage",
    "AgentStart",
    "AgentState",
    "AgentTool",
    "AgentToolResult",
    "AssistantMessage",
    "AssistantMessageBuilder",
    "AssistantMessageEvent",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "Context",
    "Cost",
    "CustomMessage",
    "DoneEvent",
    "ErrorEvent",
    "ImageContent",
    "InvalidContextError",
    "LoopOptions",
    "Message",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Model",
    "ModelCost",
    "NextTurn",
    "QueueMode",
    "StartEvent",
    "StopReason",
    "StreamFn",
    "StreamOptions",
    "TextContent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingLevel",
    "ThinkingStartEvent",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolError",
    "ToolExecution",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolInvocation",
    "ToolResultMessage",
    "ToolTimeoutError",
    "TurnContext",
    "TurnEnd",
    "TurnStart",
    "Usage",
    "UserMessage",
    "agent_loop",
    "agent_loop_continue",
    "default_convert_to_llm",
    "register_api_provider",
    "run_agent_loop",
    "run_agent_loop_continue",
    "tool",
    "within_timeout",
)
