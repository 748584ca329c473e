"""Typed results: an output type (a pydantic model, a dataclass, a TypedDict) as the run's final tool.

`OutputTool` turns the type into a tool whose successful call ends the run (`terminate`);
arguments that do not validate go back to the model as the tool's error, a bounded number of
times. While the model streams the call's arguments, `OutputTool.partial(event)` gives partial
objects. `NativeOutput` asks the provider for a schema-constrained text answer instead and parses
it. `prompt_typed` does either on an `Agent` and returns the typed object.
"""

from .._types._stream_fn import OutputSchema as OutputSchema
from ._native import NativeOutput as NativeOutput
from ._prompt import prompt_typed as prompt_typed
from ._tool import OutputError as OutputError
from ._tool import OutputTool as OutputTool

__all__ = ("NativeOutput", "OutputError", "OutputSchema", "OutputTool", "prompt_typed")
