"""The proxy protocol of pi-agent-core: its wire form, the client stream function and the
server (`proxy_app`)."""

__all__ = ()
