"""Agents served over HTTP: `AgentSSEApp`, an ASGI 3 app that runs one agent per session.

POST requests prompt, steer, abort and approve; a session's events stream to any number of
clients as server-sent events, resumable with `Last-Event-ID`. Run it with any ASGI server
(uvicorn, hypercorn).
"""

from ._serve._app import AgentSSEApp as AgentSSEApp

__all__ = ("AgentSSEApp",)
