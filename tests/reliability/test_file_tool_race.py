"""`read_file` and `list_folder` check and open a path in one operation.

Another process that swaps a folder inside the root for a symlink to the outside, between the
check and the open, used to get the outside file read (within about a thousand reads). The tools
now walk the path with directory file descriptors and no-follow opens: whatever is swapped in
meanwhile, what is opened is inside the root, or the call fails.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import agentloop as al
from agentloop.cli._tools import builtin_tools

from ..support import run_tool, text
from ._profile import examples

READS = examples(1500, 30_000)
"""Reads per run: the race was hit within about a thousand before the fix. (Each read is slow:
asyncio's debug mode and the swapping thread, hence the test's own timeout.)"""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and dir_fd opens")


def swapper(root: Path, stop: threading.Event) -> None:
    """Swap `root/sw` between a real folder and a symlink to the outside, as fast as it can."""
    while not stop.is_set():
        os.rename(root / "sw", root / "sw_dir")
        os.rename(root / "sw_link", root / "sw")
        os.rename(root / "sw", root / "sw_link")
        os.rename(root / "sw_dir", root / "sw")


async def call(tool: al.AgentTool, **args: Any) -> str:
    return text((await run_tool(tool, args)).content[0])


@pytest.mark.timeout(180)  # the reads' own bound below is 150 s
async def test_a_folder_swapped_for_a_symlink_never_leaks_a_file_outside(anyio_backend: object, tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sw").mkdir(parents=True)
    (root / "sw" / "file.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file.txt").write_text("top secret", encoding="utf-8")
    (tmp_path / "outside" / "only-outside.txt").write_text("", encoding="utf-8")
    os.symlink(tmp_path / "outside", root / "sw_link")
    tools = {t.name: t for t in builtin_tools(root)}
    stop = threading.Event()
    thread = threading.Thread(target=swapper, args=(root, stop))
    outcomes = {"inside": 0, "refused": 0, "leaked": 0, "crashed": 0}
    thread.start()
    try:
        with anyio.fail_after(150):
            for i in range(READS):
                try:
                    if i % 2:
                        text = await call(tools["read_file"], path="sw/file.txt")
                        outcomes["leaked" if "secret" in text else "inside"] += 1
                    else:
                        text = await call(tools["list_folder"], path="sw")
                        outcomes["leaked" if "only-outside" in text else "inside"] += 1
                except al.ToolError:
                    outcomes["refused"] += 1
                except OSError:  # a tool must say what went wrong as a ToolError
                    outcomes["crashed"] += 1
    finally:
        stop.set()
        thread.join()
    assert outcomes["leaked"] == 0, outcomes
    assert outcomes["crashed"] == 0, outcomes
    assert outcomes["inside"] > 0, outcomes
