"""An `AgentSSEApp` session wakes its event streams without making a wake-up per published event."""

from __future__ import annotations

from agentloop._serve._live import LiveSession

from .test_sse_app import factory


def live() -> LiveSession:
    return LiveSession("s1", factory("hello")("s1"), None, replay_limit=100, replay_bytes=1 << 20)


def test_events_published_while_no_stream_waits_make_no_wake_up() -> None:
    session = live()
    for n in range(3):
        session.publish(None, f'{{"n":{n}}}')
    assert session._changed is None
    assert [number for number, _ in session.log] == [1, 2, 3]


async def test_a_waiting_stream_is_woken_once_and_the_next_wait_gets_a_new_event(anyio_backend: object) -> None:
    session = live()
    changes = session.changes()
    assert session.changes() is changes  # every stream that waits now shares it
    session.publish(None, "{}")
    assert changes.is_set()
    session.publish(None, "{}")  # nobody waits any more: nothing made
    assert session._changed is None
    again = session.changes()
    assert again is not changes and not again.is_set()
    session.notify()
    assert again.is_set()
