"""Load figures for the wire (issue 22): `stream_proxy` calls, bytes per answer, server CPU per delta.

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
        from agentloop.providers._proxy_server import proxy_app

        return proxy_app(_delta_model(deltas), token=TOKEN, allowed_base_urls=["*"], keepalive=None)
    if kind == "sse":
        from agentloop import AgentSSEApp

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


def serve(kind: str, port: int, deltas: int, compact: bool) -> None:
    import uvicorn

    uvicorn.run(make_app(kind, deltas, compact), host="127.0.0.1", port=port, log_level="error", lifespan="on")


@contextlib.contextmanager
def server(kind: str, deltas: int, compact: bool = True, core: int = 0) -> Iterator[tuple[str, int]]:
    """Runs `serve` in a child process pinned to `core`; yields the base URL and its pid."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    call = f"wire_load.serve({kind!r}, {port}, {deltas}, {compact})"
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
    from agentloop import AgentSSEApp

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
    from agentloop.providers._proxy_server import proxy_app
    from agentloop.providers._proxy_wire import encode_request

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
            head = f"GET /sessions/{sid}/events HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
            await stream.send(head)
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as http:
                for _ in range(answers):
                    await http.post(f"/sessions/{sid}/prompt", json={"text": "go"})
                    total += await _read_until(stream, b'"type":"agent_end"', 1, buffer)
            return total
        path = "/api/stream" if kind == "proxy" else "/"
        request = (
            f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for _ in range(answers):
            await stream.send(request)
            total += await _read_until(stream, b"\r\n0\r\n\r\n", 1, buffer)
    return total


async def _server_load(kind: str, url: str, clients: int, answers: int) -> tuple[float, int]:
    from agentloop import AbortSignal, Context, StreamOptions, UserMessage
    from agentloop.providers._proxy_wire import encode_request

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
    from agentloop.providers._proxy_wire import encode_request

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
    args = parser.parse_args()
    commands = {
        "proxy-calls": proxy_calls,
        "sse-bytes": sse_bytes,
        "server-cpu": server_cpu,
        "inprocess-cpu": inprocess_cpu,
    }
    result = commands[args.cmd](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
