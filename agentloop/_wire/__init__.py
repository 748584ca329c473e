"""The JSON forms of agentloop's values: the camelCase codec, the compact event form, envelopes,
a model as JSON, the event schema, and the ASGI plumbing the servers share."""

__all__ = ()
