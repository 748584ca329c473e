"""`AgentSSEApp`: agents served over HTTP, one per session, their events as server-sent events (public
in `agentloop.serve`)."""

__all__ = ()
