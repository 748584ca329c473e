"""The exceptions agentloop raises, and the one tools raise.

    AgentLoopError(Exception)
    ├── InvalidContextError(AgentLoopError, ValueError)   the context cannot be continued
    └── AgentBusyError(AgentLoopError, RuntimeError)      an Agent run is already active
    ToolError(Exception)                                  raised by tool authors

Model and tool failures never raise out of a run: they become messages and events
(`stop_reason="error"`, `is_error=True` tool results). What reaches callers is a bad argument
(a builtin `TypeError`/`ValueError` or one of the above), their own exception unwrapped, or a
cancellation.
"""

from __future__ import annotations

__all__ = ("AgentBusyError", "AgentLoopError", "InvalidContextError", "ToolError")


class AgentLoopError(Exception):
    """Base class of the errors agentloop raises itself."""


class InvalidContextError(AgentLoopError, ValueError):
    """Raised when a run cannot continue from the given context (empty, or ends with the assistant)."""


class AgentBusyError(AgentLoopError, RuntimeError):
    """Raised when an `Agent` is asked to start a run while one is active."""


class ToolError(Exception):
    """Raised by a tool to fail its call with this message (no traceback reaches the model)."""
