"""examples/mcp_everything.py runs as written, over each transport."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "mcp_everything.py"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_example_answers_through_a_tool(
    transport: str, everything_js: str, request: pytest.FixtureRequest
) -> None:
    if transport == "stdio":
        options = ["--command", "node", "--args", everything_js, "stdio"]
    else:
        options = ["--url", request.getfixturevalue("everything_url")]
    for backend in ("asyncio", "trio"):
        result = subprocess.run(
            [sys.executable, "-W", "error", str(EXAMPLE), *options, "--backend", backend],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert "tools (echo," in lines[0]
        assert lines[1:] == ["tool get-sum: The sum of 2 and 3 is 5.", "assistant: The server says 2 + 3 = 5."]
