"""The vocabulary every layer shares: messages, events, the message builder, the stream-function
contract, the abort signal, constants and errors. Imports nothing else of agentloop."""

__all__ = ()
