"""`AgentSSEApp`: agents served over HTTP, one per session, their events as server-sent events."""

__all__ = ()
