"""The command that installs an extra into the running environment, the way agentloop was installed.

An extra is installed where agentloop came from: a clone installed editable gets
`pip install -e '/path/to/clone[local]'`, a wheel file `pip install '/path/to.whl[local]'`, an
index `pip install 'anyio-agentloop[local]'` (read from the installed distribution's
`direct_url.json`, PEP 610). The command names this environment's Python, so it installs where
the error happened, and uses `uv pip` where the environment has no pip.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ("DISTRIBUTION", "install_command", "install_target")

DISTRIBUTION = "anyio-agentloop"


def install_target(extra: str, direct_url: str | None, source_tree: Path | None) -> tuple[str, bool]:
    """What to install for `extra`, and whether editable.

    `direct_url` is the distribution's `direct_url.json` (None: installed from an index, or not
    installed); `source_tree` is the checkout agentloop runs from when it is not installed.
    """
    if direct_url is not None:
        try:
            data = json.loads(direct_url)
            url = urlsplit(data["url"])
        except (ValueError, KeyError, TypeError, AttributeError):
            data, url = {}, None
        if url is not None and url.scheme == "file":
            path = unquote(url.path)
            editable = bool((data.get("dir_info") or {}).get("editable"))
            if Path(path).exists():
                return f"{path}[{extra}]", editable
    elif source_tree is not None:
        return f"{source_tree}[{extra}]", True
    return f"{DISTRIBUTION}[{extra}]", False


def install_command(extra: str) -> str:
    """The shell command that installs `extra` into this environment (see the module docstring)."""
    try:
        found = distribution(DISTRIBUTION)
        direct_url, source_tree = found.read_text("direct_url.json"), None
    except PackageNotFoundError:  # run from a checkout on sys.path
        root = Path(__file__).resolve().parents[2]
        direct_url, source_tree = None, root if (root / "pyproject.toml").is_file() else None
    target, editable = install_target(extra, direct_url, source_tree)
    python = shlex.quote(sys.executable)
    pip = f"{python} -m pip install" if find_spec("pip") is not None else f"uv pip install --python {python}"
    return f"{pip} {'-e ' if editable else ''}{shlex.quote(target)}"
