"""The `agentloop` command line (`python -m agentloop run|chat`): everything only it uses.

`import agentloop` never loads this package. Its modules: `_command` (arguments, the terminal,
the run), `_tools` (the built-in file, calculator and clock tools), `_local_model` (the embedded
llama.cpp model and its chat template, `chatml-think.jinja`) and `_constrained_tools` (tool calls
for that small model by constrained output).
"""

from __future__ import annotations

from ._command import main

__all__ = ("main",)
