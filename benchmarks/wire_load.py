"""Load figures for the wire: `stream_proxy` calls, bytes per answer, server CPU per delta.

Not a workload of `run.py` (that runner times in-process work): these need a real HTTP server in a
process of its own, pinned to one core, and a load generator pinned to the other.

    python benchmarks/wire_load.py proxy-calls [--calls 400] [--concurrency 50] [--shared]
    python benchmarks/wire_load.py sse-bytes [--deltas 500]
    python benchmarks/wire_load.py server-cpu [--apps trivial,proxy,sse] [--deltas 500] [--clients 20]
    python benchmarks/wire_load.py inprocess-cpu [--apps trivial,proxy,sse] [--full]

`proxy-calls` runs `proxy_app` (uvicorn, core 0) and sends `stream_proxy` calls from this process
(core 1): CPU of this process per call and calls per second. To compare with another checkout, run
it with `PYTHONPATH=/path/to/that/checkout`. `sse-bytes` counts the SSE bytes of one answer
(compact and full form, and the proxy protocol's) and the replay logs of 100 sessions.
`server-cpu` serves each app with uvicorn on core 0 and loads it from core 1 with raw-socket
clients: server CPU per delta, deltas per second, bytes per answer. `inprocess-cpu` drives the
ASGI apps directly (no server, no sockets): the apps' own CPU per delta, steadier when the
machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "bench-token"


# --- the server side -------------------------------------------------------------------------


def _delta_model(deltas: int) -> Any:
    """A stream function that answers every request with `deltas` text deltas, never waiting."""
    from agentloop import AssistantMessageBuilder

    def stream(model: Any, context: Any, options: Any) -> AsyncIterator[Any]:
        async def run() -> AsyncIterator[Any]:
            b = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
            yield b.start()
            yield b.text_start()
            for _ in range(deltas):
                yield b.text_delta("abc ")
            yield b.text_end()
            yield b.done("stop")

        return run()

    return stream


def _trivial_app(deltas: int) -> Any:
    """The baseline: an ASGI app streaming `deltas` SSE lines of the size proxy_app sends."""
    line = b'data: {"type":"text_delta","contentIndex":0,"delta":"abc "}\n\n'

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for _ in range(deltas):
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


def make_app(kind: str, deltas: int, compact: bool = True) -> Any:
    if kind == "trivial":
        return _trivial_app(deltas)
    if kind == "proxy":
        from agentloop.providers._proxy._server import proxy_app

        return proxy_app(_delta_model(deltas), token=TOKEN, allowed_base_urls=["*"], keepalive=None)
    if kind == "sse":
        from agentloop.serve import AgentSSEApp

        kwargs: dict[str, Any] = {} if compact else {"compact": False}
        return AgentSSEApp(_agent_factory(deltas), **kwargs)
    raise SystemExit(f"unknown app {kind!r}")


def _agent_factory(deltas: int) -> Any:
    from agentloop import Agent

    def factory(session_id: str) -> Any:
        return Agent(model=bench_model(), stream_fn=_delta_model(deltas))

    return factory


def bench_model() -> Any:
    from agentloop import Model

    return Model(id="bench", name="bench", api="scripted", provider="bench", base_url="http://x.invalid")


def serve(kind: str, port: int, deltas: int, compact: bool, name: str = "uvicorn", fair_share: int = 0) -> None:
    if fair_share:  # what another fairness interval of the server would give (a measurement, not a setting)
        import agentloop.providers._proxy._server

        agentloop.providers._proxy._server._FAIR_SHARE = fair_share
    app = make_app(kind, deltas, compact)
    if name == "hypercorn":
        import asyncio

        from hypercorn.asyncio import serve as hypercorn_serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.loglevel = "ERROR"
        config.backlog = 1024
        config.keep_alive_timeout = 600  # a client's POST connection idles while its answer streams
        asyncio.run(hypercorn_serve(app, config))
        return
    import uvicorn

    # a client's POST connection idles while its answer streams: keep it open as long as that takes
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="error", lifespan="on", backlog=1024, timeout_keep_alive=600
    )


@contextlib.contextmanager
def server(
    kind: str, deltas: int, compact: bool = True, core: int = 0, name: str = "uvicorn", fair_share: int = 0
) -> Iterator[tuple[str, int]]:
    """Runs `serve` in a child process pinned to `core`; yields the base URL and its pid."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    call = f"wire_load.serve({kind!r}, {port}, {deltas}, {compact}, {name!r}, {fair_share})"
    code = f"import sys; sys.path.insert(0, {HERE!r}); import wire_load; {call}"
    cmd = [sys.executable, "-c", code]
    if os.cpu_count() and os.cpu_count() > 1:  # type: ignore[operator]
        cmd = ["taskset", "-c", str(core), *cmd]
    proc = subprocess.Popen(cmd, cwd=HERE)  # not the checkout root: PYTHONPATH picks the agentloop
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def _cpu_seconds(pid: int) -> float:
    """CPU time of the process so far (every thread), to the nanosecond where the kernel tells it."""
    with contextlib.suppress(OSError):
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pin_self(core: int) -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {core})


# --- stream_proxy calls ------------------------------------------------------------------------


async def _proxy_calls(url: str, calls: int, concurrency: int, shared: bool) -> tuple[float, float, int]:
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers import stream_proxy

    model = bench_model()
    context = Context(messages=(UserMessage(content="hi", timestamp=1),))
    done = 0
    client = httpx.AsyncClient(timeout=30) if shared else None
    fn = stream_proxy(url, TOKEN, client=client)
    todo = iter(range(calls))

    async def worker() -> None:
        nonlocal done
        for _ in todo:
            async with fn(model, context, StreamOptions(signal=AbortSignal())) as events:
                async for event in events:
                    if event.type == "done":
                        done += 1

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    if client is not None:
        await client.aclose()
    with contextlib.suppress(AttributeError):  # stream_proxy before its own client could be closed
        await fn.aclose()  # type: ignore[attr-defined]
    return wall, cpu, done


def proxy_calls(args: argparse.Namespace) -> dict[str, Any]:
    with server("proxy", args.deltas) as (url, _pid):
        _pin_self(1)
        anyio.run(_proxy_calls, url, 20, 5, args.shared)  # warm-up
        wall, cpu, done = anyio.run(_proxy_calls, url, args.calls, args.concurrency, args.shared)
    assert done == args.calls, (done, args.calls)
    return {
        "calls": args.calls,
        "concurrency": args.concurrency,
        "client": "shared" if args.shared else "own",
        "cpu_ms_per_call": round(cpu / args.calls * 1000, 3),
        "calls_per_s": round(args.calls / wall, 1),
    }


# --- bytes of one answer, replay log of many sessions ----------------------------------------


async def _sse_logs(deltas: int, sessions: int, compact: bool) -> list[int]:
    """Bytes in the replay log of each session after one answer of `deltas` deltas."""
    from agentloop.serve import AgentSSEApp

    app = AgentSSEApp(_agent_factory(deltas), compact=compact, replay_limit=100_000)
    transport = httpx.ASGITransport(app=app)
    sizes = []
    async with app.running(), httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        for _ in range(sessions):
            sid = (await http.post("/sessions", json={})).json()["id"]
            await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
            live = app._sessions[sid]
            while live.next_id == 1 or live.busy or b'"agent_end"' not in live.log[-1][1]:  # noqa: ASYNC110  (polls the app's log: it has no event to wait on)
                await anyio.sleep(0.005)
            sizes.append(sum(len(data) for _, data in live.log))
    return sizes


async def _proxy_bytes(deltas: int) -> int:
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers._proxy._server import proxy_app
    from agentloop.providers._proxy._wire import encode_request

    app = proxy_app(_delta_model(deltas), token=TOKEN, allowed_base_urls=["*"], keepalive=None)
    context = Context(messages=(UserMessage(content="hi", timestamp=1),))
    body = encode_request(bench_model(), context, StreamOptions(signal=AbortSignal()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as http:
        response = await http.post("/api/stream", content=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    return len(response.content)


def sse_bytes(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"deltas": args.deltas, "proxy_protocol_bytes": anyio.run(_proxy_bytes, args.deltas)}
    for compact in (False, True):
        name = "compact" if compact else "full"
        out[f"sse_{name}_bytes"] = anyio.run(_sse_logs, args.deltas, 1, compact)[0]
        logs = anyio.run(_sse_logs, args.deltas, args.sessions, compact)
        out[f"replay_logs_{name}_MB_{args.sessions}_sessions"] = round(sum(logs) / 1e6, 2)
    out["compact_over_proxy"] = round(out["sse_compact_bytes"] / out["proxy_protocol_bytes"], 2)
    return out


# --- server CPU per streamed delta ---------------------------------------------------------


async def _read_until(stream: Any, marker: bytes, count: int, buffer: bytearray) -> int:
    """Read until `marker` was seen `count` times (the buffer keeps the unread tail); bytes read."""
    seen = total = 0
    while True:
        found = buffer.find(marker)
        if found >= 0:
            seen += 1
            del buffer[: found + len(marker)]
            if seen == count:
                return total
            continue
        keep = buffer[-len(marker) :]
        chunk = await stream.receive(65536)
        total += len(chunk)
        buffer[:] = keep + chunk


async def _stream_client(kind: str, host: str, port: int, answers: int, body: bytes, sid: str) -> int:
    """One client on one keep-alive connection: `answers` answers read to their end; bytes read."""
    total = 0
    buffer = bytearray()
    async with await anyio.connect_tcp(host, port) as stream:
        if kind == "sse":
            head = f"GET /sessions/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
            await stream.send(head)
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as http:
                for _ in range(answers):
                    await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                    total += await _read_until(stream, b'"type":"agent_end"', 1, buffer)
            return total
        path = "/api/stream" if kind == "proxy" else "/"
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for _ in range(answers):
            await stream.send(request)
            total += await _read_until(stream, b"\r\n0\r\n\r\n", 1, buffer)
    return total


async def _server_load(kind: str, url: str, clients: int, answers: int) -> tuple[float, int]:
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers._proxy._wire import encode_request

    host, port = url.removeprefix("http://").split(":")
    context = Context(messages=(UserMessage(content="hi", timestamp=1),))
    body = encode_request(bench_model(), context, StreamOptions(signal=AbortSignal()))
    sids = [""] * clients
    if kind == "sse":
        async with httpx.AsyncClient(base_url=url) as http:
            sids = [(await http.post("/sessions", json={})).json()["id"] for _ in range(clients)]
    results: list[int] = []

    async def one(sid: str) -> None:
        results.append(await _stream_client(kind, host, int(port), answers, body, sid))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for sid in sids:
            tg.start_soon(one, sid)
    return time.perf_counter() - start, sum(results)


def server_cpu(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"deltas": args.deltas, "clients": args.clients, "answers_per_client": args.answers}
    for kind in args.apps.split(","):
        with server(kind, args.deltas, compact=not args.full) as (url, pid):
            _pin_self(1)
            anyio.run(_server_load, kind, url, 2, 1)  # warm-up
            cpu = _cpu_seconds(pid)
            wall, received = anyio.run(_server_load, kind, url, args.clients, args.answers)
            cpu = _cpu_seconds(pid) - cpu
        deltas = args.clients * args.answers * args.deltas
        out[kind] = {
            "server_us_per_delta": round(cpu / deltas * 1e6, 2),
            "deltas_per_s": round(deltas / wall),
            "bytes_per_answer": received // (args.clients * args.answers),
        }
    if "trivial" in out:
        base = out["trivial"]["server_us_per_delta"]
        for kind in ("proxy", "sse"):
            if kind in out:
                out[kind]["throughput_vs_trivial"] = round(base / out[kind]["server_us_per_delta"], 2)
    return out


# --- server CPU per delta, in process (no HTTP server: steadier on a shared machine) -----------


async def _asgi_answers(kind: str, answers: int, deltas: int, compact: bool) -> float:
    """CPU seconds of `answers` answers of `deltas` deltas, driven through the ASGI app directly."""
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers._proxy._wire import encode_request

    app = make_app(kind, deltas, compact)
    if kind == "sse":
        async with (
            app.running(),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as http,
        ):
            sid = (await http.post("/sessions", json={})).json()["id"]
            live = app._sessions[sid]
            start = time.process_time()
            for _ in range(answers):
                before = live.next_id
                await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                while live.next_id == before or live.busy or b'"agent_end"' not in live.log[-1][1]:  # noqa: ASYNC110
                    await anyio.sleep(0.0005)
            return time.process_time() - start
    context = Context(messages=(UserMessage(content="hi", timestamp=1),))
    body = encode_request(bench_model(), context, StreamOptions(signal=AbortSignal()))
    headers = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/stream",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
    }

    async def one() -> None:
        requested, done = False, anyio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        await app(scope, receive, send)

    start = time.process_time()
    for _ in range(answers):
        await one()
    return time.process_time() - start


def inprocess_cpu(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"deltas": args.deltas, "answers": args.answers}
    for kind in args.apps.split(","):
        best = min(anyio.run(_asgi_answers, kind, args.answers, args.deltas, not args.full) for _ in range(3))
        out[kind] = {"us_per_delta": round(best / (args.answers * args.deltas) * 1e6, 2)}
    return out


# --- load: throughput, first-event latency and memory at 50 to 200 clients ----------------------


class _Reader:
    """What one connection receives, read as it comes; `count` is every byte read so far."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.count = 0

    async def _more(self) -> None:
        chunk = await self.stream.receive(65536)
        self.count += len(chunk)
        self.buffer += chunk

    async def until(self, marker: bytes) -> None:
        """Read until `marker`; drop it and what came before it."""
        start = 0
        while (found := self.buffer.find(marker, start)) < 0:
            start = max(0, len(self.buffer) - len(marker) + 1)
            await self._more()
        del self.buffer[: found + len(marker)]

    async def response(self) -> bytes:
        """One whole HTTP/1.1 response with a content-length (the SSE app's answer to a POST)."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            await self._more()
        head = bytes(self.buffer[:end]).lower()
        del self.buffer[: end + 4]
        length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
        while len(self.buffer) < length:
            await self._more()
        body = bytes(self.buffer[:length])
        del self.buffer[:length]
        return head.split(b" ", 2)[1] + b" " + body


class _Round:
    """What one round of clients saw: first-event latencies and bytes per answer."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.answer_bytes: list[int] = []


async def _answers_on_one_connection(host: str, port: int, request: bytes, answers: int, seen: _Round) -> None:
    """A proxy protocol (or trivial app) client: `answers` POSTs in a row on one keep-alive connection."""
    async with await anyio.connect_tcp(host, port) as stream:
        reader = _Reader(stream)
        for _ in range(answers):
            before = reader.count
            start = time.perf_counter()
            await stream.send(request)
            await reader.until(b"data: ")
            seen.latencies.append(time.perf_counter() - start)
            await reader.until(b"\r\n0\r\n\r\n")  # the end of a chunked body
            seen.answer_bytes.append(reader.count - before)


async def _answers_of_one_session(host: str, port: int, sid: str, answers: int, seen: _Round) -> None:
    """An AgentSSEApp client: the session's event stream open on one connection, prompts POSTed on
    another; the latency runs from the prompt's POST to the first event of the run."""
    sid, last = sid.split(" ")  # the events after the last one sent before (earlier rounds)
    prompt = b'{"text":"go"}'
    post = (
        f"POST /sessions/{sid}/prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(prompt)}\r\n\r\n"
    ).encode() + prompt
    async with await anyio.connect_tcp(host, port) as events, await anyio.connect_tcp(host, port) as posts:
        stream, answers_to_posts = _Reader(events), _Reader(posts)
        await events.send(f"GET /sessions/{sid}/events?lastEventId={last} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        await stream.until(b"retry: 1000\n\n")
        for _ in range(answers):
            before = stream.count
            while True:
                start = time.perf_counter()
                await posts.send(post)
                status = await answers_to_posts.response()
                if not status.startswith(b"409"):
                    break
                await anyio.sleep(0.001)  # the last run has sent agent_end but not quite ended yet
            assert status.startswith(b"202"), status
            await stream.until(b"data: ")
            seen.latencies.append(time.perf_counter() - start)
            await stream.until(b'"type":"agent_end"')
            await stream.until(b"\n\n")
            seen.answer_bytes.append(stream.count - before)


async def _load_round(kind: str, url: str, sids: list[str], answers: int) -> tuple[_Round, float]:
    """Every client at once, each doing `answers` answers; what they saw and the wall time."""
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers._proxy._wire import encode_request

    host, port = url.removeprefix("http://").split(":")
    context = Context(messages=(UserMessage(content="hi", timestamp=1),))
    body = encode_request(bench_model(), context, StreamOptions(signal=AbortSignal()))
    request = (
        f"POST {'/' if kind == 'trivial' else '/api/stream'} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    seen = _Round()
    start = time.perf_counter()
    with anyio.fail_after(300):  # a stuck stream fails the run instead of hanging it
        await _run_clients(kind, host, int(port), request, sids, answers, seen)
    return seen, time.perf_counter() - start


async def _run_clients(
    kind: str, host: str, port: int, request: bytes, sids: list[str], answers: int, seen: _Round
) -> None:
    async with anyio.create_task_group() as tg:
        for sid in sids:
            if kind == "sse":
                tg.start_soon(_answers_of_one_session, host, port, sid, answers, seen)
            else:
                tg.start_soon(_answers_on_one_connection, host, port, request, answers, seen)


async def _sessions_now(url: str, count: int, sids: list[str]) -> list[str]:
    """`count` new sessions (or `sids` again), each as `"<id> <its last event id>"`."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        if not sids:
            return [" ".join((await http.post("/sessions", json={})).json().values()) for _ in range(count)]
        ids = [sid.split(" ")[0] for sid in sids]
        return [f"{sid} {(await http.get(f'/sessions/{sid}')).json()['lastEventId']}" for sid in ids]


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def load(args: argparse.Namespace) -> dict[str, Any]:
    """Each app on the same server (core 0) and raw-socket clients (core 1), at each client count."""
    levels = [int(n) for n in args.clients.split(",")]
    out: dict[str, Any] = {
        "server": args.server,
        "fair_share": args.fair_share or "default",
        "deltas": args.deltas,
        "answers_per_client": args.answers,
        "load_average": os.getloadavg()[0],
        "rows": [],
        "memory_mb": {},
    }
    _pin_self(1)
    for kind in args.apps.split(","):
        with server(kind, args.deltas, not args.full, name=args.server, fair_share=args.fair_share) as (url, pid):
            anyio.run(_load_round, kind, url, _sessions_for(kind, url, 2), 1)  # warm-up
            memory = out["memory_mb"][kind] = [round(_rss_mb(pid), 1)]
            first_sids: list[str] = []
            for clients in levels:
                sids = _sessions_for(kind, url, clients)
                first_sids = first_sids or sids
                cpu, client_cpu = _cpu_seconds(pid), time.process_time()
                seen, wall = anyio.run(_load_round, kind, url, sids, args.answers)
                cpu, client_cpu = _cpu_seconds(pid) - cpu, time.process_time() - client_cpu
                deltas = clients * args.answers * args.deltas
                assert len(seen.latencies) == clients * args.answers, (kind, len(seen.latencies))
                out["rows"].append(
                    {
                        "app": kind,
                        "clients": clients,
                        "deltas_per_s": round(deltas / wall),
                        "server_us_per_delta": round(cpu / deltas * 1e6, 2),
                        "server_busy": round(cpu / wall, 2),
                        "client_busy": round(client_cpu / wall, 2),
                        "first_event_p50_ms": round(_percentile(seen.latencies, 0.5) * 1000, 1),
                        "first_event_p99_ms": round(_percentile(seen.latencies, 0.99) * 1000, 1),
                        "bytes_per_answer": round(sum(seen.answer_bytes) / len(seen.answer_bytes)),
                        "rss_mb": round(_rss_mb(pid), 1),
                    }
                )
                memory.append(round(_rss_mb(pid), 1))
                print(out["rows"][-1], file=sys.stderr, flush=True)
            for _ in range(args.rounds):  # the first level's clients again: does memory level off?
                anyio.run(_load_round, kind, url, _sessions_for(kind, url, levels[0], first_sids), args.answers)
                memory.append(round(_rss_mb(pid), 1))
    base = {row["clients"]: row for row in out["rows"] if row["app"] == "trivial"}
    for row in out["rows"]:
        if row["clients"] in base:
            row["x_trivial_cpu"] = round(base[row["clients"]]["server_us_per_delta"] / row["server_us_per_delta"], 2)
            row["x_trivial_wall"] = round(row["deltas_per_s"] / base[row["clients"]]["deltas_per_s"], 2)
    return out


def _sessions_for(kind: str, url: str, count: int, sids: list[str] | None = None) -> list[str]:
    return anyio.run(_sessions_now, url, count, sids or []) if kind == "sse" else [""] * count


def load_table(result: dict[str, Any]) -> str:
    """The markdown table of a `load` result."""
    columns = [
        ("app", "app"),
        ("clients", "clients"),
        ("deltas_per_s", "deltas/s"),
        ("x_trivial_wall", "x trivial (wall)"),
        ("server_us_per_delta", "server us/delta"),
        ("x_trivial_cpu", "x trivial (CPU)"),
        ("first_event_p50_ms", "first event p50 ms"),
        ("first_event_p99_ms", "p99 ms"),
        ("bytes_per_answer", "bytes/answer"),
        ("server_busy", "server busy"),
        ("client_busy", "client busy"),
    ]
    lines = [
        f"{result['server']}, FAIR_SHARE {result['fair_share']}, {result['deltas']} deltas an answer, "
        f"{result['answers_per_client']} answers a client, load average {result['load_average']:.1f}",
        "",
        "| " + " | ".join(title for _, title in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(str(row.get(key, "")) for key, _ in columns) + " |" for row in result["rows"]]
    lines += ["", "| app | server RSS MB: after warm-up, after each level, after each further round |", "|---|---|"]
    lines += [f"| {kind} | {' -> '.join(str(m) for m in mb)} |" for kind, mb in result["memory_mb"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("proxy-calls")
    p.add_argument("--calls", type=int, default=400)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--deltas", type=int, default=20)
    p.add_argument("--shared", action="store_true")
    p = sub.add_parser("sse-bytes")
    p.add_argument("--deltas", type=int, default=500)
    p.add_argument("--sessions", type=int, default=100)
    p = sub.add_parser("server-cpu")
    p.add_argument("--apps", default="trivial,proxy,sse")
    p.add_argument("--deltas", type=int, default=500)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--answers", type=int, default=5)
    p.add_argument("--full", action="store_true", help="AgentSSEApp(compact=False)")
    p = sub.add_parser("inprocess-cpu")
    p.add_argument("--apps", default="trivial,proxy,sse")
    p.add_argument("--deltas", type=int, default=500)
    p.add_argument("--answers", type=int, default=20)
    p.add_argument("--full", action="store_true", help="AgentSSEApp(compact=False)")
    p = sub.add_parser("load")
    p.add_argument("--apps", default="trivial,proxy,sse")
    p.add_argument("--server", choices=("uvicorn", "hypercorn"), default="uvicorn")
    p.add_argument("--clients", default="50,100,200")
    p.add_argument("--deltas", type=int, default=500)
    p.add_argument("--answers", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="further rounds at the first client count (memory)")
    p.add_argument("--full", action="store_true", help="AgentSSEApp(compact=False)")
    p.add_argument("--json", help="also write the result here")
    p.add_argument(
        "--fair-share",
        type=int,
        default=0,
        help="run the server with agentloop.providers._proxy._server._FAIR_SHARE = N",
    )
    args = parser.parse_args()
    commands = {
        "proxy-calls": proxy_calls,
        "sse-bytes": sse_bytes,
        "server-cpu": server_cpu,
        "inprocess-cpu": inprocess_cpu,
        "load": load,
    }
    result = commands[args.cmd](args)
    if args.cmd == "load":
        print(load_table(result))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return
    print(json.dumps(result))


if __name__ == "__main__":
    main()
