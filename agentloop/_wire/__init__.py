"""The JSON forms of agentloop's values: the camelCase codec, the compact event form, envelopes,
a model as JSON and the event schema. Its public names are in `agentloop.wire`."""

__all__ = ()
