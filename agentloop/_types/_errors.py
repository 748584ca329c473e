"""The exceptions agentloop raises, and the one tools raise.

    AgentLoopError(Exception)
    ├── InvalidContextError(AgentLoopError, ValueError)   the context cannot be continued
    └── AgentBusyError(AgentLoopError, RuntimeError)      an Agent run is already active
    ToolError(Exception)                                  raised by tool authors
    ToolTimeoutError(AgentLoopError, TimeoutError)        a tool ran past its `timeout`

Model and tool failures never raise out of a run: they become messages and events
(`stop_reason="error"`, `is_error=True` tool results). What reaches callers is a bad argument
(a builtin `TypeError`/`ValueError` or one of the above), their own exception unwrapped, or a
cancellation.
"""

from __future__ import annotations

__all__ = ("AgentBusyError", "AgentLoopError", "InvalidContextError", "ToolError", "ToolTimeoutError")


class AgentLoopError(Exception):
    """Base class of the errors agentloop raises itself."""


class InvalidContextError(AgentLoopError, ValueError):
    """Raised when a run cannot continue from the given context (empty, or ends with the assistant)."""


class AgentBusyError(AgentLoopError, RuntimeError):
    """Raised when an `Agent` is asked to start a run while one is active."""


class ToolError(Exception):
    """Raised by a tool to fail its call with this message (no traceback reaches the model)."""


class ToolTimeoutError(AgentLoopError, TimeoutError):
    """A tool ran past its `timeout` (what `proceed()` raises to a `wrap_tool_call`).

    The loop turns it into the call's error result ("Tool NAME timed out after N s") unless a
    wrapper handles it first: a durable engine records it as the step's outcome.
    """
