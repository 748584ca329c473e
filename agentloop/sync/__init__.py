"""Agents without `async`: a blocking facade for scripts and notebooks.

`SyncAgent` wraps an `Agent` and runs each call on an event loop of its own, in a thread of its
own (anyio's blocking portal), so it works in a plain script and inside a running event loop
(Jupyter's asyncio loop, a trio program). Ctrl-C aborts the run cleanly. `sync_context` enters an
async context manager (the embedded model, a server) for the length of a `with` block.
"""

from ._agent import SyncAgent as SyncAgent
from ._context import sync_context as sync_context

__all__ = ("SyncAgent", "sync_context")
