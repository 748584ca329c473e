"""End to end in a real browser: headless Chromium runs examples/sse_chat.html against the app.

The page creates a session, opens an EventSource, sends a prompt, renders the streamed text and
the tool call, and at `agent_end` posts what it saw to `/report`. Skipped when Chromium
(Debian's `chromium` package) or hypercorn is not installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..support import served
from .helpers import chromium

ROOT = Path(__file__).parents[2]

# A real browser: Debian's Chromium, installed by .ci/run (apt-get install chromium).
pytestmark = pytest.mark.servers


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("sse_chat_example", ROOT / "examples" / "sse_chat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
async def test_chromium_streams_text_and_a_tool_call(anyio_backend: object, tmp_path: Path) -> None:
    reports: list[Any] = []
    reported = anyio.Event()

    def on_report(data: Any) -> None:
        reports.append(data)
        reported.set()

    app = load_example().build_app(on_report)
    with anyio.fail_after(90):
        async with served(app) as url, chromium(f"{url}/?report=1", tmp_path):
            with anyio.fail_after(60):
                await reported.wait()
    (report,) = reports
    assert report["answers"] == ["Let me add those up.", "2 + 3 = 5"]
    assert report["tools"] == [
        {"id": "call-1", "name": "add", "args": {"a": 2, "b": 3}, "result": "5", "isError": False}
    ]
    assert report["deltas"] == 9  # every text chunk reached the page as its own event
    # The page's text grew chunk by chunk ("Let me " ... "up.", then "2 " ... "5").
    assert report["partialLengths"] == [7, 11, 17, 20, 2, 4, 6, 8, 9]
    assert report["lastEventId"] == report["events"] > 20
    assert "add({&quot;a&quot;:2,&quot;b&quot;:3}) = 5" in report["html"] or 'add({"a":2,"b":3}) = 5' in report["html"]
