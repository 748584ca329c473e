"""The agent loop: its options, the run's state, the model call, the tool batch and its order,
abort, the `agent_loop` stream and the stateful `Agent`."""

__all__ = ()
