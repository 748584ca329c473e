"""`--approve`: the terminal asks before each tool call runs (y: run it; n or nothing: do not;
any other answer: do not, and tell the model that answer as the reason)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from .._core._agent import Agent
from ..approvals import ApprovalRequest

__all__ = ("TerminalApprover", "answer_of")

_YES = ("y", "yes")
_NO = ("", "n", "no")
_DENIED = "The user did not allow this tool call"


def answer_of(line: str | None) -> tuple[bool, str | None]:
    """`(approved, reason)` of a line typed (None: the input ended, which denies)."""
    text = "" if line is None else line.strip()
    if text.lower() in _YES:
        return True, None
    if text.lower() in _NO:
        return False, _DENIED
    return False, f"{_DENIED}: {text}"


class TerminalApprover:
    """An `on_approval_request` that asks the question and reads the answer (`read_line`)."""

    def __init__(self, say: Callable[[str], None], read_line: Callable[[], Awaitable[str | None]]) -> None:
        self.say = say
        self.read_line = read_line
        self.agent: Agent | None = None

    async def __call__(self, request: ApprovalRequest) -> None:
        assert self.agent is not None
        arguments = json.dumps(dict(request.arguments), ensure_ascii=False)
        if len(arguments) > 400:
            arguments = arguments[:400] + "..."
        self.say(f"Run {request.tool_name} {arguments}? [y/N/reason]")
        approved, reason = answer_of(await self.read_line())
        await self.agent.approve(request.tool_call_id, approved, reason)
