"""Security: keys stay secret, the proxy checks its token, file tools stay in their root, and no
model output is ever run as code.

- A canary API key goes through every provider (OpenAI Chat Completions, Responses, Anthropic,
  the proxy client and server) and every failure path (a 4xx or 5xx that echoes it, connection
  refused, malformed stream, an error event mid-stream, a wrong content type, a stream cut short,
  an abort): it never shows in events, error messages, exceptions, logs (DEBUG), reprs or the JSON
  codec's output. The same holds through the loop and the `Agent`.
- The proxy server answers 401 without its token and compares it with `hmac.compare_digest`.
- The command line's file tools refuse `..`, absolute paths, symlinks out of the root, symlink
  loops and unusable names; the calculator refuses anything but arithmetic, and results too large.
- No module of the package calls `eval`, `exec`, `compile`, `pickle`, `marshal`, `yaml.load`,
  `os.system` / `os.popen` or a subprocess with `shell=True` (an allow-list names the exceptions).
"""

from __future__ import annotations

import ast
import functools
import hmac
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agentloop as al
from agentloop.providers import (
    HTTPOptions,
    proxy_app,
    stream_anthropic,
    stream_openai_completions,
    stream_openai_responses,
    stream_proxy,
)
from agentloop.testing import ScriptedModel
from agentloop.wire import dumps

from ..support import free_port, run_tool, text

KEY = "sk-canary-7f3a9c0e5b1d4a2f"
TOKEN = "proxy-canary-token-91b2c3d4"
HTTP = HTTPOptions(max_retries=1, backoff=0.001, max_backoff=0.002)
PACKAGE = Path(al.__file__).parent

# --- a canary key through every provider and failure path --------------------------------------


def _events(*items: dict[str, Any], named: bool = True) -> bytes:
    return "".join(
        (f"event: {item['type']}\n" if named else "") + f"data: {json.dumps(item)}\n\n" for item in items
    ).encode()


_CHAT_OK = (
    _events(
        {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        named=False,
    )
    + b"data: [DONE]\n\n"
)
_RESPONSES_OK = _events(
    {"type": "response.output_item.added", "item": {"type": "message", "id": "m1"}},
    {"type": "response.output_text.delta", "item_id": "m1", "delta": "hi"},
    {"type": "response.completed", "response": {"status": "completed"}},
)
_ANTHROPIC_OK = _events(
    {"type": "message_start", "message": {"id": "m"}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    {"type": "message_stop"},
)
PROVIDERS: dict[str, tuple[str, Callable[..., Any], bytes, bytes]] = {
    # api, stream function, a good body, an error event that echoes the key
    "completions": (
        "openai-completions",
        stream_openai_completions,
        _CHAT_OK,
        f'data: {{"error":{{"message":"key {KEY} revoked","type":"invalid_request_error"}}}}\n\n'.encode(),
    ),
    "responses": (
        "openai-responses",
        stream_openai_responses,
        _RESPONSES_OK,
        f'event: error\ndata: {{"type":"error","error":{{"message":"key {KEY} revoked"}}}}\n\n'.encode(),
    ),
    "anthropic": (
        "anthropic-messages",
        stream_anthropic,
        _ANTHROPIC_OK,
        _events({"type": "error", "error": {"type": "authentication_error", "message": f"key {KEY}"}}),
    ),
}


def _sse(body: bytes, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers={"content-type": "text/event-stream", **headers}, content=body)


def _echo_json(status: int) -> Callable[[httpx.Request, bytes, bytes], httpx.Response]:
    def make(request: httpx.Request, ok: bytes, error: bytes) -> httpx.Response:
        return httpx.Response(status, json={"error": {"message": f"Incorrect API key provided: {KEY}", "type": "x"}})

    return make


def _refused(request: httpx.Request, ok: bytes, error: bytes) -> httpx.Response:
    raise httpx.ConnectError(f"[Errno 111] Connection refused (sent {list(request.headers.values())})")


def _cut_short(request: httpx.Request, ok: bytes, error: bytes) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        yield ok[:60]
        raise httpx.RemoteProtocolError(f"peer closed connection; request had x-api-key={KEY}")

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


FAILURES: dict[str, Callable[[httpx.Request, bytes, bytes], httpx.Response]] = {
    "success": lambda request, ok, error: _sse(ok),
    "401 echoing the key": _echo_json(401),
    "403 echoing the key": _echo_json(403),
    "429 echoing the key, retried": _echo_json(429),
    "500 text echoing the key": lambda request, ok, error: httpx.Response(500, text=f"<html>bad key {KEY}</html>"),
    "connection refused": _refused,
    "malformed stream echoing the key": lambda request, ok, error: _sse(f"data: {{not json {KEY}\n\n".encode()),
    "error event echoing the key": lambda request, ok, error: _sse(error),
    "wrong content type": lambda request, ok, error: httpx.Response(200, json={"echo": KEY}),
    "cut short": _cut_short,
    "abort": lambda request, ok, error: _sse(ok),
}


def assert_secret_absent(secret: str, *things: Any) -> None:
    for thing in things:
        assert secret not in repr(thing), f"the secret shows in {thing!r}"
        assert secret not in str(thing)


def assert_events_clean(secret: str, events: list[Any]) -> None:
    for event in events:
        assert_secret_absent(secret, event)
        assert secret not in dumps(event)


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("name", sorted(PROVIDERS))
async def test_a_canary_key_never_leaks_from_a_provider(
    anyio_backend: object, caplog: pytest.LogCaptureFixture, name: str, failure: str
) -> None:
    caplog.set_level(logging.DEBUG)
    api, stream_fn, ok, error = PROVIDERS[name]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return FAILURES[failure](request, ok, error)

    model = al.Model(id="m", api=api, provider="openai" if "openai" in api else "anthropic", base_url="http://mock/v1")
    signal = al.AbortSignal()
    options = al.StreamOptions(signal=signal, api_key=KEY)
    events: list[Any] = []
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            stream = stream_fn(
                model, al.Context(messages=(al.UserMessage(content="hi"),)), options, http=HTTP, client=client
            )
            assert_secret_absent(KEY, stream, options)
            async with stream:
                async for event in stream:
                    events.append(event)
                    if failure == "abort":
                        signal.abort()
    assert seen and all(KEY in "".join(r.headers.values()) for r in seen), "the key is sent (in its header)"
    assert events[-1].type == ("done" if failure == "success" else "error")
    assert_events_clean(KEY, events)
    assert KEY not in caplog.text
    if failure not in ("success", "abort", "wrong content type", "cut short"):
        assert "***" in (events[-1].error.error_message or ""), events[-1]


async def test_a_canary_key_from_the_environment_never_leaks(
    anyio_backend: object, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = al.Model(id="m", api="openai-completions", provider="openai", base_url="http://mock/v1")

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        return httpx.Response(401, json={"error": {"message": f"bad key {KEY}"}})

    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            options = al.StreamOptions(signal=al.AbortSignal())
            stream = stream_openai_completions(model, al.Context(), options, http=HTTP, client=client)
            events = [event async for event in stream]
    assert_events_clean(KEY, events)
    assert KEY not in caplog.text


async def test_connection_refused_on_a_real_socket_never_shows_the_key(
    anyio_backend: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A real transport (httpcore logs at DEBUG) to a closed loopback port."""
    caplog.set_level(logging.DEBUG)
    port = free_port()
    for api, stream_fn in (("openai-completions", stream_openai_completions), ("anthropic-messages", stream_anthropic)):
        model = al.Model(id="m", api=api, provider="x", base_url=f"http://127.0.0.1:{port}/v1")
        options = al.StreamOptions(signal=al.AbortSignal(), api_key=KEY)
        with anyio.fail_after(10):
            events = [e async for e in stream_fn(model, al.Context(), options, http=HTTP)]
        assert events[-1].type == "error" and "connect" in (events[-1].error.error_message or "").lower()
        assert_events_clean(KEY, events)
    assert KEY not in caplog.text


async def test_a_canary_key_never_leaks_through_the_loop_and_the_agent(
    anyio_backend: object, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})

    model = al.Model(id="m", api="openai-completions", provider="openai", base_url="http://mock/v1")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        stream_fn = functools.partial(stream_openai_completions, http=HTTP, client=client)
        config = al.AgentLoopConfig(model=model, api_key=KEY)
        events: list[al.AgentEvent] = []
        with anyio.fail_after(10):
            async with al.agent_loop(
                [al.UserMessage(content="hi")], al.AgentContext(), config, None, stream_fn
            ) as stream:
                events += [event async for event in stream]
            agent = al.Agent(model=model, stream_fn=stream_fn, get_api_key=lambda provider: KEY)
            agent.subscribe(lambda event, signal: events.append(event))
            await agent.prompt("hi")
    assert_secret_absent(KEY, config, agent.state, agent.state.messages)
    assert_events_clean(KEY, events)
    assert agent.state.error_message and "***" in agent.state.error_message
    assert KEY not in caplog.text


# --- the proxy -----------------------------------------------------------------------------------


def _proxy_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))


async def _proxy_events(call: Any) -> list[Any]:
    async with call as events:
        return [event async for event in events]


async def test_the_proxy_servers_key_never_reaches_the_client(
    anyio_backend: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The server holds the key; an upstream failure that echoes it, or a stream function that
    raises with it in its message, reaches the client redacted."""
    caplog.set_level(logging.DEBUG)

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})

    async def raising(model: al.Model, context: al.Context, options: al.StreamOptions) -> AsyncIterator[Any]:
        raise RuntimeError(f"could not use key {options.api_key}")
        yield  # pragma: no cover

    model = al.Model(id="m", api="openai-completions", provider="openai", base_url="http://mock/v1")
    messages = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as upstream_client:
        for served in (functools.partial(stream_openai_completions, http=HTTP, client=upstream_client), raising):
            app = proxy_app(
                served,
                token=TOKEN,
                get_api_key=lambda provider: KEY,
                allowed_base_urls=["http://mock"],
                key_base_urls={"openai": ["http://mock"]},
            )
            async with _proxy_client(app) as client:
                fn = stream_proxy("http://proxy.test", TOKEN, client=client)
                options = al.StreamOptions(signal=al.AbortSignal(), api_key="client-side-key-never-sent")
                with anyio.fail_after(10):
                    events = await _proxy_events(fn(model, al.Context(), options))
            assert events[-1].type == "error"
            messages.append(events[-1].error.error_message)
            assert_events_clean(KEY, events)
            assert_secret_absent(TOKEN, fn, app, *events)
    # Each failure happened where it should: the upstream answered, the stream function raised.
    assert messages == ["HTTP 401: Incorrect API key provided: ***", "could not use key ***"]
    assert KEY not in caplog.text and TOKEN not in caplog.text


async def test_the_proxy_token_never_shows_in_client_errors(anyio_backend: object) -> None:
    """A proxy (or a middlebox) that echoes the bearer token back: the client's error hides it."""

    def echo_401(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": f"bad token {request.headers['authorization']}"})

    def echo_event(request: httpx.Request) -> httpx.Response:
        line = f'data: {{"type":"error","reason":"error","errorMessage":"token {TOKEN} expired"}}\n\n'
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=line.encode())

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused: {request.headers['authorization']}")

    for handler in (echo_401, echo_event, refuse):
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            for token in (TOKEN, lambda: TOKEN):
                fn = stream_proxy("http://proxy.test", token, client=client)
                with anyio.fail_after(10):
                    events = await _proxy_events(
                        fn(al.Model(id="m"), al.Context(), al.StreamOptions(signal=al.AbortSignal()))
                    )
                assert events[-1].type == "error"
                assert_events_clean(TOKEN, events)


@pytest.mark.parametrize(
    "authorization",
    [
        f"Bearer {TOKEN[:-1]}",  # a prefix
        f"Bearer {TOKEN[:-1]}X",  # the last character differs
        f"Bearer {TOKEN.upper()}",
        f"Bearer {TOKEN} {TOKEN}",
        f"Token {TOKEN}",
        "Bearer",
        "Bearer ",
        f"Bearer\t{TOKEN}x",
    ],
)
async def test_the_proxy_refuses_near_miss_tokens(anyio_backend: object, authorization: str) -> None:
    served = ScriptedModel(["never"])
    async with _proxy_client(proxy_app(served, token=TOKEN)) as client:
        with anyio.fail_after(10):
            response = await client.post(
                "http://proxy.test/api/stream",
                json={"model": {"id": "m"}, "context": {"messages": []}},
                headers={"authorization": authorization},
            )
    assert response.status_code == 401 and served.calls == []
    assert TOKEN not in response.text


async def test_the_proxy_refuses_non_ascii_authorization_bytes(anyio_backend: object) -> None:
    served = ScriptedModel(["never"])
    app = proxy_app(served, token=TOKEN)
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/stream",
        "headers": [(b"authorization", b"Bearer " + TOKEN.encode() + b"\xff\x00")],
    }
    with anyio.fail_after(10):
        await app(scope, receive, send)
    assert sent[0]["status"] == 401 and served.calls == []


def test_the_proxy_compares_its_token_with_hmac_compare_digest() -> None:
    """The check is in the code: `_authorized` calls `hmac.compare_digest` with the token, and no
    `==` / `!=` / `in` anywhere in the module involves the token."""
    from agentloop.providers._proxy import _server as _proxy_server

    tree = ast.parse(Path(_proxy_server.__file__).read_text())
    authorized = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_authorized")
    calls = [
        n
        for n in ast.walk(authorized)
        if isinstance(n, ast.Call)
        and ast.unparse(n.func) == "hmac.compare_digest"
        and any("self._token" in ast.unparse(arg) for arg in n.args)
    ]
    assert calls, "_authorized must compare the token with hmac.compare_digest"
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and "_token" in ast.unparse(node):
            raise AssertionError(f"the token is compared with an operator: {ast.unparse(node)}")
    assert vars(_proxy_server)["hmac"] is hmac


# --- the command line's file tools and calculator -------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "sub" / "inside.txt").write_text("inside", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret", encoding="utf-8")
    os.symlink("loop2", base / "loop1")
    os.symlink("loop1", base / "loop2")
    os.symlink("self", base / "self")
    os.symlink(tmp_path / "outside", base / "out_dir")  # a symlinked folder leading out
    os.symlink(base / "sub", base / "in_dir")  # a symlinked folder staying in
    os.symlink("../outside/missing", base / "dangling")
    os.symlink("sub/../../outside/secret.txt", base / "sneaky")
    os.mkfifo(base / "fifo")
    return base


async def _call(root: Path, name: str, **args: Any) -> str:
    from agentloop.cli._tools import builtin_tools

    tool = next(t for t in builtin_tools(root) if t.name == name)
    return text((await run_tool(tool, args)).content[0])


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("out_dir/secret.txt", "outside the root"),  # through a symlinked folder
        ("out_dir", "outside the root"),
        ("in_dir/../out_dir/secret.txt", "outside the root"),
        ("sneaky", "outside the root"),
        ("dangling", "outside the root"),
        ("loop1", "symlink loop"),
        ("loop1/x", "symlink loop"),
        ("self", "symlink loop"),
        ("sub/" + "a" * 5000, "not a"),  # the name is too long for the system: a clean refusal
        ("\ud800", "not a usable path"),
        ("fifo", "not a"),  # a FIFO would block a reader forever
        (str(Path("/") / "etc" / "passwd"), "outside the root"),
        ("//etc/passwd", "outside the root"),
        ("sub/../../outside/secret.txt", "outside the root"),
    ],
)
@pytest.mark.parametrize("tool", ["read_file", "list_folder"])
async def test_file_tools_refuse_every_way_out(
    anyio_backend: object, root: Path, tool: str, path: str, problem: str
) -> None:
    with anyio.fail_after(5), pytest.raises(al.ToolError, match=problem):
        await _call(root, tool, path=path)


async def test_file_tools_follow_symlinks_that_stay_inside(anyio_backend: object, root: Path) -> None:
    with anyio.fail_after(5):
        assert await _call(root, "read_file", path="in_dir/inside.txt") == "inside"
        assert await _call(root, "list_folder", path="in_dir") == "inside.txt"


@pytest.mark.parametrize(
    "expression",
    [
        "(((((10**1000)**10)**10)**10)**10)",  # was minutes of CPU and gigabytes, blocking the event loop
        "((10**1000)**4)**4",
        "999999**999*999999**999",  # a result Python refuses to print (over 4300 digits)
        "2**14000",
    ],
)
def test_the_calculator_refuses_results_too_large_at_once(expression: str) -> None:
    import time

    from agentloop.cli._tools import calculate

    started = time.perf_counter()
    with pytest.raises(al.ToolError, match="too large"):
        calculate(expression)
    assert time.perf_counter() - started < 0.5


def test_the_calculator_still_computes_big_results_it_can_print() -> None:
    from agentloop.cli._tools import calculate

    assert calculate("2**100") == 2**100
    assert len(str(calculate("(10**999)*9"))) == 1000


# --- nothing evaluates model output as code --------------------------------------------------------

_DANGEROUS_CALLS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "breakpoint",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execvp",
    "os.spawnv",
    "pickle.load",
    "pickle.loads",
    "marshal.load",
    "marshal.loads",
    "yaml.load",
    "yaml.unsafe_load",
    "yaml.full_load",
    "shelve.open",
    "asyncio.create_subprocess_shell",
    "importlib.import_module",
}
_DANGEROUS_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "yaml", "code", "codeop"}
ALLOWED = {
    # (file, what): why it is safe
    ("_local_model.py", "subprocess"): "starts pip and llama.cpp with a fixed argument list, no shell",
}


def _findings(path: Path) -> list[tuple[str, int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in _DANGEROUS_CALLS or name in {"builtins.eval", "builtins.exec"}:
                found.append((name, node.lineno, ast.unparse(node)[:80]))
            for keyword in node.keywords:
                if keyword.arg == "shell" and not (
                    isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                ):
                    found.append(("shell=True", node.lineno, ast.unparse(node)[:80]))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in names:
                top = module.split(".")[0]
                if top in _DANGEROUS_MODULES or top == "subprocess":
                    found.append((top, node.lineno, ast.unparse(node)))
    return sorted(found, key=lambda item: item[1])


def test_nothing_in_the_package_evaluates_code() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    problems = []
    used_allowances = set()
    for path in files:
        for what, line, code in _findings(path):
            key = (path.name, what)
            if key in ALLOWED:
                used_allowances.add(key)
                continue
            problems.append(f"{path.relative_to(PACKAGE)}:{line}: {what}: {code}")
    assert not problems, "code evaluation or shell use outside the allow-list:\n" + "\n".join(problems)
    assert used_allowances == set(ALLOWED), f"stale allow-list entries: {set(ALLOWED) - used_allowances}"


def test_the_scanner_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import pickle\nimport subprocess\nimport yaml\n"
        "eval(x)\nexec(y)\nos.system(z)\nsubprocess.run(c, shell=True)\nyaml.load(t)\ncompile(s, 'f', 'exec')\n"
        "ast.literal_eval(v)\nre.compile(p)\n"
    )
    kinds = [what for what, _, _ in _findings(sample)]
    assert kinds == ["pickle", "subprocess", "yaml", "eval", "exec", "os.system", "shell=True", "yaml.load", "compile"]
