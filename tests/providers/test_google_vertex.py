"""Vertex AI (`google-vertex`): its URLs, and who a request is sent as: a token or a token
function, an express-mode API key, or the application default credentials of `google-auth`
(a service account whose token endpoint is a local server)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from agentloop import AbortSignal, Model, TextContent
from agentloop.providers import HTTPOptions, _google_vertex, get_model, stream_google_vertex, stream_simple
from agentloop.providers._google_vertex import _Auth, vertex_url

from .helpers import Server, context, ok, options

FLASH = get_model("google-vertex", "gemini-2.5-flash")
ANSWER = b'data: {"candidates":[{"content":{"parts":[{"text":"ok"}]},"finishReason":"STOP"}]}\r\n\r\n'


@pytest.fixture(autouse=True)
def _no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_CLOUD_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_google_vertex, "_adc", [])


async def run(server: Server, model: Model = FLASH, **kwargs: Any) -> Any:
    stream_options = kwargs.pop("options", None) or options(api_key=None)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        stream = stream_google_vertex(
            model, context(), stream_options, http=HTTPOptions(max_retries=0), client=client, **kwargs
        )
        return await stream.result()


@pytest.mark.parametrize(
    ("location", "url"),
    [
        ("us-central1", "https://us-central1-aiplatform.googleapis.com/v1/projects/p1/locations/us-central1"),
        ("global", "https://aiplatform.googleapis.com/v1/projects/p1/locations/global"),
        ("eu", "https://aiplatform.eu.rep.googleapis.com/v1/projects/p1/locations/eu"),
    ],
)
def test_the_url_of_a_project_and_location(location: str, url: str) -> None:
    method = "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert vertex_url(FLASH, _Auth(token="t", project="p1", location=location)) == url + method


def test_the_url_in_express_mode_and_on_a_base_url_of_ones_own() -> None:
    method = "publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert vertex_url(FLASH, _Auth(key="k")) == f"https://aiplatform.googleapis.com/v1/{method}"
    proxy = Model(id="gemini-2.5-flash", api="google-vertex", base_url="http://proxy:8080/")
    assert vertex_url(proxy, _Auth(token="t")) == f"http://proxy:8080/v1/{method}"
    mock = Model(id="gemini-2.5-flash", api="google-vertex", base_url="http://m/v1/projects/p/locations/l")
    assert vertex_url(mock, _Auth(key="k")) == f"http://m/v1/projects/p/locations/l/{method}"
    tuned = Model(id="projects/p/locations/l/endpoints/42", api="google-vertex", base_url=FLASH.base_url)
    assert vertex_url(tuned, _Auth(token="t", project="p", location="l")) == (
        "https://l-aiplatform.googleapis.com/v1/projects/p/locations/l/endpoints/42:streamGenerateContent?alt=sse"
    )


async def test_a_token_goes_as_a_bearer_to_the_projects_url_and_is_redacted_from_errors() -> None:
    server = Server(ok(ANSWER), httpx.Response(401, json={"error": {"message": "Bad token ya29.secret-token"}}))
    final = await run(server, project="p1", location="us-east5", token="ya29.secret-token")
    assert final.content == (TextContent("ok"),)
    request = server.requests[0]
    assert request.headers["authorization"] == "Bearer ya29.secret-token"
    assert "x-goog-api-key" not in request.headers
    assert str(request.url).startswith("https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5/")
    assert server.bodies[0]["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    refused = await run(server, project="p1", location="us-east5", token="ya29.secret-token")
    assert refused.error_message == "HTTP 401: Bad token ***"


async def test_a_token_function_plain_or_async_is_called_for_each_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    tokens = iter(["t-1", "t-2"])

    async def fresh() -> str:
        await anyio.lowlevel.checkpoint()
        return next(tokens)

    server = Server(ok(ANSWER), ok(ANSWER), ok(ANSWER))
    await run(server, token=fresh)
    await run(server, token=fresh)
    await run(server, token=lambda: "t-plain")
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer t-1", "Bearer t-2", "Bearer t-plain"]
    assert "/projects/env-project/locations/europe-west4/" in str(server.requests[0].url)


async def test_an_api_key_is_express_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server(ok(ANSWER), ok(ANSWER))
    await run(server, options=options(api_key="AQ.key"))
    monkeypatch.setenv("GOOGLE_CLOUD_API_KEY", "AQ.env-key")
    await run(server)
    assert [r.headers["x-goog-api-key"] for r in server.requests] == ["AQ.key", "AQ.env-key"]
    assert str(server.requests[0].url).startswith("https://aiplatform.googleapis.com/v1/publishers/google/models/")


async def test_without_project_location_or_credentials_the_stream_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()
    final = await run(server, token="t", location="us-central1")
    assert final.error_message == (
        "Vertex AI requires a project ID: set GOOGLE_CLOUD_PROJECT (or GCLOUD_PROJECT), or pass project="
    )
    final = await run(server, token="t", project="p")
    assert final.error_message == "Vertex AI requires a location: set GOOGLE_CLOUD_LOCATION, or pass location="
    monkeypatch.setitem(sys.modules, "google.auth", None)  # google-auth not installed
    final = await run(server, project="p", location="l")
    assert final.stop_reason == "error"
    assert final.error_message is not None and "pip install 'anyio-agentloop[vertex]'" in final.error_message
    assert server.requests == []


async def test_a_failing_token_function_ends_the_stream_with_its_error() -> None:
    def broken() -> str:
        raise RuntimeError("the vault is sealed")

    final = await run(Server(), project="p", location="l", token=broken)
    assert (final.stop_reason, final.error_message) == (
        "error",
        "The token function failed: RuntimeError: the vault is sealed",
    )


async def test_a_plain_token_function_runs_in_a_worker_thread_and_must_give_a_token() -> None:
    threads: list[threading.Thread] = []

    def blocking() -> str:
        threads.append(threading.current_thread())
        return "t-thread"

    server = Server(ok(ANSWER))
    final = await run(server, project="p", location="l", token=blocking)
    assert final.content == (TextContent("ok"),)
    assert threads and threads[0] is not threading.current_thread()
    empty = await run(server, project="p", location="l", token=lambda: "")
    assert empty.error_message == "The token function returned str, not a token (a non-empty str)"
    assert len(server.requests) == 1


async def test_an_abort_while_the_token_is_fetched_ends_the_stream_as_aborted() -> None:
    signal = AbortSignal()

    async def slow() -> str:
        signal.abort()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    server = Server()
    final = await run(server, options=options(api_key=None, signal=signal), project="p", location="l", token=slow)
    assert (final.stop_reason, final.error_message) == ("aborted", "Request was aborted")
    assert server.requests == []


def test_bad_arguments_raise_at_the_call() -> None:
    with pytest.raises(TypeError, match="token must be a str"):
        stream_google_vertex(FLASH, context(), options(), token=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="project must be a str"):
        stream_google_vertex(FLASH, context(), options(), project=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"client must be an httpx\.AsyncClient"):
        stream_google_vertex(FLASH, context(), options(), client=object())  # type: ignore[arg-type]


# --- application default credentials (google-auth) ----------------------------------------


class _TokenEndpoint(BaseHTTPRequestHandler):
    grants: list[str] = []  # noqa: RUF012

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        self.grants.append(self.rfile.read(length).decode())
        answer = json.dumps({"access_token": f"ya29.adc-{len(self.grants)}", "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A service-account key file whose token endpoint is a local server; yields its grants."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    _TokenEndpoint.grants = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path / "sa.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "sa-project",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "agent@sa-project.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": f"http://127.0.0.1:{server.server_address[1]}/token",
            }
        )
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    try:
        yield _TokenEndpoint.grants
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_application_default_credentials_are_loaded_refreshed_once_and_reused(
    service_account: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import google.auth.transport.requests as transport

    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    refreshed_on: list[threading.Thread] = []
    send = transport.Request.__call__

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        refreshed_on.append(threading.current_thread())
        return send(self, *args, **kwargs)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(transport.Request, "__call__", recorded)
    server = Server(ok(ANSWER), ok(ANSWER))
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        for _ in range(2):
            final = await stream_simple(FLASH, context(), options(api_key=None), client=client).result()
            assert final.content == (TextContent("ok"),)
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer ya29.adc-1", "Bearer ya29.adc-1"]
    assert "/projects/sa-project/locations/us-central1/" in str(server.requests[0].url)
    assert len(service_account) == 1
    assert refreshed_on and threading.current_thread() not in refreshed_on  # the refresh ran off the event loop
    assert "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer" in service_account[0]


def test_importing_agentloop_and_its_providers_loads_no_google_library() -> None:
    code = (
        "import sys, agentloop, agentloop.providers\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] in ('google', 'requests', 'cryptography')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
