"""`agentloop chat` compacts its context: as it fills the model's window, and on `/compact`."""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.cli import _command
from agentloop.cli._compaction import gauge_text
from agentloop.context import SUMMARIZATION_SYSTEM_PROMPT
from agentloop.testing import ScriptedModel


class Piped(io.StringIO):
    def isatty(self) -> bool:
        return False


def text(message: al.AgentMessage) -> str:
    assert isinstance(message, al.UserMessage)
    content = message.content
    return content if isinstance(content, str) else "".join(b.text for b in content if isinstance(b, al.TextContent))


async def test_chat_compacts_on_slash_compact_and_when_the_window_fills(
    anyio_backend: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(["a1", "a2", "## Goal\nS1", "a3", "## Goal\nS2", "a4"])

    @contextlib.asynccontextmanager
    async def open_model(args: Any, say: Any) -> AsyncIterator[Any]:
        yield al.Model(id="scripted", api="scripted", context_window=2400), model, False

    monkeypatch.setattr(_command, "open_model", open_model)
    prompt = "word " * 480  # 2,400 characters: about 600 tokens
    lines = [f"p1 {prompt}", f"p2 {prompt}", "/compact keep the numbers", f"p3 {prompt}", f"p4 {prompt}"]
    source = Piped("\n".join(lines) + "\n")
    args = _command.parse_args(["chat"], source)
    out, err = Piped(), Piped()
    with anyio.fail_after(10):
        code = await _command.run_cli(args, source, out, err)
    assert code == 0, err.getvalue()
    assert out.getvalue() == "a1\na2\na3\na4\n"
    summaries = [c for c in model.calls if c.system_prompt == SUMMARIZATION_SYSTEM_PROMPT]
    assert len(summaries) == 2
    assert "keep the numbers" in text(summaries[0].messages[0])  # /compact's instructions focus it
    assert "<previous-summary>\n## Goal\nS1" in text(summaries[1].messages[0])  # then updated in place
    notes = [line for line in err.getvalue().splitlines() if line.startswith("(context compacted")]
    assert len(notes) == 2 and notes[0].startswith("(context compacted: 2 messages summarised")
    last = model.calls[-1].messages
    assert text(last[0]).startswith("The conversation history before this point was compacted")
    assert "S2" in text(last[0]) and text(last[-1]).startswith("p4 ")
    summary_line = err.getvalue().splitlines()[-1]
    assert "context " in summary_line and "/2.4k (" in summary_line  # how full the window is


def test_the_gauge_says_how_full_the_window_is() -> None:
    assert gauge_text(2100, 4096) == "context 2.1k/4.1k (51%)"
    assert gauge_text(640, 4096) == "context 640/4.1k (16%)"
    assert gauge_text(640, 0) == "context 640"


def test_the_embedded_models_window_is_one_slot_of_its_server() -> None:
    from agentloop.cli._local_model import SLOT_CONTEXT

    assert SLOT_CONTEXT == 4096  # what the server gives one request, not the 8,192 the model is made for
