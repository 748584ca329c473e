"""Tools: `AgentTool`, the `@tool` decorator, and the validation and coercion of a model's
arguments against a tool's JSON schema."""

__all__ = ()
