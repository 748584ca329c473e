"""The tools of the approval kill test: `delete` records its calls in a file, so that the test
sees whether (and with which arguments) it ran, in whichever process."""

from __future__ import annotations

import json
import os

import anyio

import agentloop as al

LOG = "AGENTLOOP_TEST_DELETE_LOG"


@al.tool
async def look(path: str) -> str:
    """Read a file."""
    return f"read {path}"


@al.tool
async def delete(path: str) -> str:
    """Delete a file."""
    async with await anyio.open_file(os.environ[LOG], "a") as log:
        await log.write(json.dumps({"pid": os.getpid(), "path": path}) + "\n")
    return f"deleted {path}"


TOOLS = [look, delete]
