"""`AgentState`: what an `Agent` knows (the transcript, the model, the tools, what a run is doing)."""

from __future__ import annotations

from collections.abc import Sequence

from .._tools._tool import AgentTool
from .._types._constants import THINKING_LEVELS
from .._types._events import (
    AgentEnd,
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
)
from .._types._messages import AgentMessage, Model, ThinkingLevel
from ._loop import check_messages

__all__ = ("AgentState",)


class AgentState:
    """What an `Agent` knows. Assigning `tools` or `messages` stores a copy of the list.

    `is_streaming`, `streaming_message`, `pending_tool_calls` and `error_message` are read-only:
    the Agent's reducer maintains them from the run's events.
    """

    __slots__ = (
        "_error_message",
        "_is_streaming",
        "_messages",
        "_model",
        "_pending_tool_calls",
        "_streaming_message",
        "_system_prompt",
        "_thinking_level",
        "_tools",
    )

    def __init__(
        self,
        *,
        system_prompt: str,
        model: Model,
        thinking_level: ThinkingLevel,
        tools: Sequence[AgentTool],
        messages: Sequence[AgentMessage],
    ) -> None:
        self.system_prompt = system_prompt
        self.model = model
        self.thinking_level = thinking_level
        self.tools = tools
        self.messages = messages
        self._is_streaming = False
        self._streaming_message: AgentMessage | MessageUpdate | None = None
        self._pending_tool_calls: frozenset[str] = frozenset()
        self._error_message: str | None = None

    @property
    def system_prompt(self) -> str:
        """The system prompt of the next run."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, system_prompt: str) -> None:
        if not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
        self._system_prompt = system_prompt

    @property
    def model(self) -> Model:
        """The model the next run uses."""
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        if not isinstance(model, Model):
            raise TypeError(f"model must be an agentloop.Model, got {type(model).__name__}")
        self._model = model

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The reasoning level the next run asks for (`off` disables it)."""
        return self._thinking_level

    @thinking_level.setter
    def thinking_level(self, level: ThinkingLevel) -> None:
        if level not in THINKING_LEVELS:
            raise ValueError(f"thinking_level must be one of {THINKING_LEVELS}, got {level!r}")
        self._thinking_level = level

    @property
    def tools(self) -> list[AgentTool]:
        """The tools of the next run."""
        return self._tools

    @tools.setter
    def tools(self, tools: Sequence[AgentTool]) -> None:
        if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
            raise TypeError(f"tools must be a sequence of AgentTool, got {type(tools).__name__}")
        for i, tool in enumerate(tools):
            if not isinstance(tool, AgentTool):
                raise TypeError(f"tools[{i}] must be an AgentTool, got {type(tool).__name__}")
        self._tools = list(tools)

    @property
    def messages(self) -> list[AgentMessage]:
        """The transcript."""
        return self._messages

    @messages.setter
    def messages(self, messages: Sequence[AgentMessage]) -> None:
        self._messages = check_messages(messages, "messages")

    @property
    def is_streaming(self) -> bool:
        """True from the start of a run until its `agent_end` listeners have finished."""
        return self._is_streaming

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message being streamed (between its `message_start` and `message_end`)."""
        message = self._streaming_message
        if isinstance(message, MessageUpdate):
            return message.message
        return message

    @property
    def pending_tool_calls(self) -> frozenset[str]:
        """Ids of the tool calls started and not yet finalized."""
        return self._pending_tool_calls

    @property
    def error_message(self) -> str | None:
        """The error of the last failed turn or run; cleared when a run starts."""
        return self._error_message

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self._model.id!r}, messages={len(self._messages)}, "
            f"is_streaming={self._is_streaming}, error_message={self._error_message!r})"
        )

    def reduce(self, event: AgentEvent) -> None:
        """Apply one event of a run (the `Agent` calls it before its listeners see the event)."""
        if isinstance(event, MessageUpdate):
            self._streaming_message = event  # its message is built only if someone reads it
        elif isinstance(event, MessageStart):
            self._streaming_message = event.message
        elif isinstance(event, MessageEnd):
            self._streaming_message = None
            self._messages.append(event.message)
        elif isinstance(event, ToolExecutionStart):
            self._pending_tool_calls = self._pending_tool_calls | {event.tool_call_id}
        elif isinstance(event, ToolExecutionEnd):
            self._pending_tool_calls = self._pending_tool_calls - {event.tool_call_id}
        elif isinstance(event, TurnEnd):
            if event.message.error_message:
                self._error_message = event.message.error_message
        elif isinstance(event, AgentEnd):
            self._streaming_message = None

    def run_started(self) -> None:
        self._is_streaming = True
        self._streaming_message = None
        self._error_message = None

    def run_ended(self) -> None:
        self._is_streaming = False
        self._streaming_message = None
        self._pending_tool_calls = frozenset()

    def reset(self) -> None:
        self._messages = []
        self.run_ended()
        self._error_message = None
