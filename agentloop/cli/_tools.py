"""The command line's built-in tools: read a file, list a folder, a calculator, the current time.

File tools stay inside a root folder, and checking a path and opening it are one operation
(`open_inside`): the path is walked from the root's file descriptor one name at a time, each
folder opened relative to the one before with a no-follow open, symlinks read and followed by
the walk itself. `..` above the root, absolute paths and symlinks leading out are refused, and
another process swapping a folder for a symlink meanwhile cannot make the tool open a file
outside the root (the open fails, and the walk starts again). Where the system has no
`dir_fd` opens (Windows), the path is resolved, checked, then opened. The calculator parses
arithmetic with `ast` and evaluates only numbers and operators: model output is never run as
code.
"""

from __future__ import annotations

import ast
import datetime as _dt
import errno
import math
import operator
import os
import stat
from collections import deque
from pathlib import Path
from typing import Any

import anyio

from .._tools._decorator import tool
from .._tools._tool import AgentTool
from .._types._errors import ToolError
from .._types._messages import AgentToolResult, TextContent

__all__ = (
    "MAX_DIGITS",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "builtin_tools",
    "calculate",
    "open_inside",
    "resolve_inside",
)

MAX_READ_BYTES = 64 * 1024
MAX_LIST_ENTRIES = 200
MAX_DIGITS = 4000
"""The calculator refuses integers longer than this (Python will not even print them past 4300
digits, and computing a tower of powers would block the event loop for minutes)."""
_MAX_BITS = int(MAX_DIGITS * math.log2(10))


def resolve_inside(root: Path, path: str) -> Path:
    """`path` (relative to `root`) resolved, or ToolError when it leaves `root` or cannot be resolved."""
    if "\x00" in path:
        raise ToolError("the path contains a NUL character")
    base = root.resolve()
    try:
        target = (base / path).resolve()
    except RuntimeError:  # Python < 3.13 reports a symlink loop so
        raise ToolError(f"{path!r} cannot be resolved: it goes through a symlink loop") from None
    except (OSError, ValueError) as exc:  # a name too long, lone surrogates...
        raise ToolError(f"{path!r} is not a usable path: {exc.__class__.__name__}") from None
    if target != base and base not in target.parents:
        raise ToolError(f"{path!r} is outside the root folder {str(base)!r}; use a path inside it")
    return target


_MAX_LINKS = 40
_ATTEMPTS = 5
_WALKS = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")


class _Changed(Exception):
    """A name changed between its look-up and its open (another process is at work): walk again."""


def open_inside(root: Path, path: str, *, folder: bool) -> int:
    """An open file descriptor of `path` (a file, or a folder with `folder`) inside `root`.

    ToolError when the path leaves the root, is not a file (or folder), or cannot be used. The
    caller closes the descriptor. Files are opened non-blocking, so a FIFO never blocks; only
    a regular file (or a folder) is returned.
    """
    what = "folder" if folder else "file"
    if not _WALKS:  # pragma: no cover - Windows: resolved, checked, then opened (files only)
        target = resolve_inside(root, path)
        if folder or not _holds(target.is_file):
            raise ToolError(f"{path!r} is not a {what}")
        return os.open(target, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    if "\x00" in path:
        raise ToolError("the path contains a NUL character")
    base = root.resolve()
    for _ in range(_ATTEMPTS):
        try:
            fd = _walk(base, path, folder)
        except _Changed:
            continue
        except (UnicodeError, ValueError) as exc:  # lone surrogates...
            raise ToolError(f"{path!r} is not a usable path: {exc.__class__.__name__}") from None
        except OSError as exc:
            raise ToolError(f"{path!r} is not a {what} that can be opened ({os.strerror(exc.errno or 0)})") from None
        try:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
                raise ToolError(f"{path!r} is not a {what}")
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise ToolError(f"{path!r} keeps changing while it is opened; try again later")


def _walk(base: Path, path: str, folder: bool) -> int:
    """`open_inside`'s walk: one name at a time from the root, no open ever following a symlink."""
    what = "folder" if folder else "file"
    outside = ToolError(f"{path!r} is outside the root folder {str(base)!r}; use a path inside it")
    names = deque(_inside_parts(base, path, outside))
    fds = [os.open(base, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        links = 0
        while names:
            name = names.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                if len(fds) == 1:
                    raise outside
                os.close(fds.pop())
                continue
            try:
                info = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                raise ToolError(f"{path!r} is not a {what}") from None
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise ToolError(f"{path!r} cannot be resolved: it goes through a symlink loop")
                target = os.readlink(name, dir_fd=fds[-1])
                if os.path.isabs(target):
                    for fd in fds[1:]:
                        os.close(fd)
                    del fds[1:]
                names.extendleft(reversed(_inside_parts(base, target, outside)))
                continue
            need_folder = folder or any(n not in ("", ".") for n in names)
            if not (stat.S_ISDIR(info.st_mode) if need_folder else stat.S_ISREG(info.st_mode)):
                raise ToolError(f"{path!r} is not a {what}")  # a FIFO or a device is never opened
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if need_folder else os.O_NONBLOCK)
            try:
                fd = os.open(name, flags, dir_fd=fds[-1])
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    raise _Changed from None  # swapped for a symlink (or removed) since the look-up
                raise
            fds.append(fd)
        return fds.pop()
    finally:
        for fd in fds:
            os.close(fd)


def _inside_parts(base: Path, path: str, outside: ToolError) -> list[str]:
    """The names of `path` to walk from the root (an absolute path must lead into the root)."""
    parts = Path(path).parts
    if Path(path).is_absolute():
        if parts[: len(base.parts)] != base.parts:
            raise outside
        parts = parts[len(base.parts) :]
    return list(parts)


def _binary(op: type[ast.operator]) -> Any:
    return {
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod,
        ast.Pow: _power,
        ast.BitXor: _power,  # `2^10`: a power, as calculators write it
    }.get(op)


def _power(a: float, b: float) -> float:
    if abs(b) > 1000 or (abs(a) > 1e6 and b > 10):
        raise ToolError("the exponent is too large")
    if isinstance(a, int) and isinstance(b, int) and b > 1 and abs(a) > 1 and b * math.log2(abs(a)) > _MAX_BITS:
        raise ToolError(f"the result is too large (more than {MAX_DIGITS} digits)")
    result: Any = a**b
    if isinstance(result, complex):
        raise ToolError("the result is not a real number")
    return float(result) if isinstance(result, float) else result


_FUNCTIONS: dict[str, Any] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def calculate(expression: str) -> float | int:
    """Evaluate arithmetic (`+ - * / // % **`, `^` as a power too, parentheses, sqrt, abs, round,
    log, sin, cos, pi, e)."""
    if len(expression) > 500:
        raise ToolError("the expression is longer than 500 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and (fn := _binary(type(node.op))) is not None:
            left, right = walk(node.left), walk(node.right)
            try:
                return _bounded(fn(left, right))
            except ZeroDivisionError:
                raise ToolError("division by zero") from None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            return _bounded(_FUNCTIONS[node.func.id](*(walk(arg) for arg in node.args)))
        raise ToolError(f"unsupported in an arithmetic expression: {ast.dump(node)[:60]}")

    try:
        return walk(tree)  # type: ignore[no-any-return]
    except (OverflowError, ValueError, TypeError) as exc:
        raise ToolError(f"cannot compute {expression!r}: {exc}") from None


def _bounded(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise ToolError(f"the result is too large (more than {MAX_DIGITS} digits)")
    return value


def builtin_tools(root: Path) -> list[AgentTool]:
    """The command line's tools, file tools confined to `root`."""

    @tool
    async def read_file(path: str, max_bytes: int = MAX_READ_BYTES) -> str:
        """Read a text file inside the root folder.

        Args:
            path: The file's path, relative to the root folder.
            max_bytes: Read at most this many bytes (the rest is cut).
        """
        limit = max(1, min(max_bytes, MAX_READ_BYTES))
        data = await anyio.to_thread.run_sync(_read_head, root, path, limit + 1)
        text = data[:limit].decode("utf-8", errors="replace")
        return text + ("\n[... cut]" if len(data) > limit else "")

    @tool
    async def list_folder(path: str = ".") -> str:
        """List a folder inside the root folder (folders end with '/', symbolic links with '@').

        Args:
            path: The folder's path, relative to the root folder.
        """
        entries = await anyio.to_thread.run_sync(_list, root, path)
        shown = entries[:MAX_LIST_ENTRIES]
        more = f"\n[... {len(entries) - len(shown)} more]" if len(entries) > len(shown) else ""
        return "\n".join(shown) + more if shown else "(empty folder)"

    @tool
    async def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression, for example '2 * (3 + 4) ** 2', '2 ^ 10' or 'sqrt(2)'.

        Args:
            expression: The expression.
        """
        return f"{expression} = {calculate(_left_side(expression))}"

    @tool
    async def current_time() -> AgentToolResult:
        """The current date and time (local time zone, ISO 8601)."""
        now = _dt.datetime.now().astimezone()
        return AgentToolResult(
            content=(TextContent(now.isoformat(timespec="seconds")),), details={"tz": str(now.tzinfo)}
        )

    return [read_file, list_folder, calculator, current_time]


def _left_side(expression: str) -> str:
    """`expression`, or its left side when it is written as an equation (`12 * 12 = 160`): a small
    model often writes the answer it guesses after the expression; the calculator checks it."""
    left, equals, _ = expression.partition("=")
    if equals and left.strip() and not left.endswith(("<", ">", "!", "=")) and "=" not in _:
        return left
    return expression


def _holds(check: Any) -> bool:
    """`check()`, with a path the system refuses to look at (a name too long...) counting as False."""
    try:
        return bool(check())
    except (OSError, ValueError):
        return False


def _read_head(root: Path, path: str, size: int) -> bytes:
    fd = open_inside(root, path, folder=False)
    try:
        chunks: list[bytes] = []
        left = size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _list(root: Path, path: str) -> list[str]:
    if not _WALKS:  # pragma: no cover - Windows: scandir takes no descriptor there
        target = resolve_inside(root, path)
        if not _holds(target.is_dir):
            raise ToolError(f"{path!r} is not a folder")
        with os.scandir(target) as entries:
            return sorted(_entry_name(entry) for entry in entries)
    fd = open_inside(root, path, folder=True)
    try:
        with os.scandir(fd) as entries:
            return sorted(_entry_name(entry) for entry in entries)
    except OSError as exc:
        raise ToolError(f"{path!r} cannot be listed ({os.strerror(exc.errno or 0)})") from None
    finally:
        os.close(fd)


def _entry_name(entry: os.DirEntry[str]) -> str:
    """The entry's name, marked as `ls -F` does: a symbolic link is shown as one (`name@`), never
    followed, so a loop cannot fail the listing and a link leading out of the root tells nothing
    of what it points at."""
    if entry.is_symlink():
        return entry.name + "@"
    return entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
