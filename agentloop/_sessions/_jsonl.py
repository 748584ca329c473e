"""The JSONL session backend: one append-only `<id>.jsonl` file per session.

Each line is one record; a write (one record, or the lines of one append) is written whole and
then `fsync`ed:

    {"type":"session","version":1,"id":...,"time":...,"title":...,"parentId":...,"forkIndex":...,"settings":{...}}
    {"type":"message","index":0,"time":...,"message":{...the codec's JSON form...}}
    {"type":"update","time":...,"title":...}                  title and/or settings changed
    {"type":"replace","time":...,"messages":[...]}           the whole transcript replaced
    {"type":"compaction","time":...,"compaction":{...}}       a compaction (CompactionState.to_json())

A compaction keeps the whole history: the model's context is rebuilt from its summary and the
messages from its `firstKeptIndex` on. A replace drops the compactions before it.

The header line is written with the file (a temporary file linked into place), so every session
file starts with one. An append of several messages is one write whose first line says how many
lines it holds (`"batch": n`), so it is recognized whole on load. A crash can only tear the end
of the file (a last line without its final newline or that does not parse, or an append cut
short); readers drop that tail (the whole append it belongs to), logging a warning on the
`agentloop.sessions` logger, and the next writer truncates it away before appending. Any other
bad line is corruption (`SessionCorruptError`). A write that fails (a full disk, a file-size limit, a
failed fsync) is cut back off the file before its `SessionError` is raised. A writer holds an
exclusive `flock` on the file for as long as its `Session` is open; the kernel drops it when the
process dies, so a crashed writer never leaves a stale lock behind.
"""

from __future__ import annotations

import builtins
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from .._wire._json_text import decode_json, encode_json
from ._backend import Backend, Writer
from ._model import (
    JSONDict,
    Meta,
    SessionCorruptError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
)

__all__ = (
    "JSONLBackend",
    "VERSION",
    "parse",
)

VERSION = 1
_SUFFIX = ".jsonl"
_MESSAGE_PREFIX = b'{"type":"message","index"'  # a message line that does not start a batch
_log = logging.getLogger("agentloop.sessions")


def _dumps(record: JSONDict) -> bytes:
    return (encode_json(record) + "\n").encode("utf-8")


def _message_line(index: int, time: int, text: str, batch: int = 1) -> bytes:
    # The message's JSON text is spliced in as is: it was encoded once, by the session.
    if batch > 1:  # the first line of an append of `batch` lines
        return f'{{"type":"message","batch":{batch},"index":{index},"time":{time},"message":{text}}}\n'.encode()
    return f'{{"type":"message","index":{index},"time":{time},"message":{text}}}\n'.encode()


def _compaction_line(entry: JSONDict, time: int) -> bytes:
    return _dumps({"type": "compaction", "time": time, "compaction": entry})


def _header(meta: Meta) -> JSONDict:
    return {
        "type": "session",
        "version": VERSION,
        "id": meta.id,
        "time": meta.created,
        "title": meta.title,
        "parentId": meta.parent_id,
        "forkIndex": meta.fork_index,
        "settings": meta.settings,
    }


class _Parsed:
    __slots__ = ("messages", "meta", "valid_length")

    def __init__(self, meta: Meta, messages: list[Any], valid_length: int) -> None:
        self.meta = meta
        self.messages = messages
        self.valid_length = valid_length


def parse(data: bytes, where: str, *, messages: bool = True) -> _Parsed:
    """Read a session file's bytes: its metadata, its messages' JSON forms, and the length of
    its valid part (everything but a torn last line).

    With `messages=False` message lines are counted, not parsed (for listing sessions).
    """
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty unless the last line is torn
    valid_length = len(data) - len(tail)
    meta: Meta | None = None
    out: list[Any] = []
    count = 0
    last = len(lines) - 1
    offset = 0  # where the line starts in `data`
    # An append under way: its lines still to come, and where it started (offset, count, len(out)).
    batch: tuple[int, int, int, int] | None = None
    for number, line in enumerate(lines):
        start, offset = offset, offset + len(line) + 1
        if meta is not None and not messages and number < last and line.startswith(_MESSAGE_PREFIX):
            count += 1
            batch = _next_line(batch)
            continue
        try:
            record = decode_json(line, constants=True)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            kind = record["type"]
            time = record["time"]
            if not isinstance(time, int):
                raise ValueError("bad time")
            if meta is None:
                if kind != "session":
                    raise ValueError("the first record is not the session header")
                if record.get("version") != VERSION:
                    raise SessionCorruptError(f"{where}: unknown session file version {record.get('version')!r}")
                meta = Meta(
                    id=record["id"],
                    created=time,
                    updated=time,
                    title=record.get("title"),
                    parent_id=record.get("parentId"),
                    fork_index=record.get("forkIndex"),
                    settings=record.get("settings") or {},
                )
                continue
            if kind == "message":
                index = record["index"]
                if index != count:
                    raise SessionCorruptError(f"{where}: line {number + 1} holds message {index}, expected {count}")
                size = record.get("batch", 1)
                if not isinstance(size, int) or size < 1:
                    raise ValueError("bad batch size")
                batch = (size, start, count, len(out)) if size > 1 else batch
                if messages:
                    out.append(record["message"])
                count += 1
            elif kind == "update":
                if "title" in record:
                    meta.title = record["title"]
                if "settings" in record:
                    meta.settings = record["settings"]
            elif kind == "compaction":
                entry = record["compaction"]
                if not isinstance(entry, dict):
                    raise ValueError("bad compaction record")
                meta.compactions.append(entry)
            elif kind == "replace":
                replaced = record["messages"]
                if not isinstance(replaced, list):
                    raise ValueError("bad replace record")
                count = len(replaced)
                meta.compactions = []
                if messages:
                    out = list(replaced)
            else:
                raise ValueError(f"unknown record type {kind!r}")
            meta.updated = time
            batch = _next_line(batch)
        except (ValueError, KeyError, TypeError) as exc:
            if number == last and not tail:
                # A last line that does not parse: torn by a crash (or a disk that lost its tail).
                valid_length -= len(line) + 1
                break
            raise SessionCorruptError(f"{where}: line {number + 1} is not a valid record ({exc})") from None
    if meta is None:
        raise SessionCorruptError(f"{where}: no session header")
    if batch is not None:  # an append cut short: none of it was acknowledged
        valid_length = batch[1]
        count = batch[2]
        del out[batch[3] :]
    if valid_length < len(data):
        _log.warning("%s: dropped a torn tail of %d bytes (a write cut short)", where, len(data) - valid_length)
    meta.message_count = count
    return _Parsed(meta, out, valid_length)


def _next_line(batch: tuple[int, int, int, int] | None) -> tuple[int, int, int, int] | None:
    """The append under way after one more of its lines was read (None once it is whole)."""
    if batch is None or batch[0] == 1:
        return None
    return (batch[0] - 1, *batch[1:])


def _fsync_dir(directory: Path) -> None:
    if sys.platform == "win32":  # pragma: no cover - directories cannot be opened there
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _lock(fd: int) -> bool:
    """Try to take an exclusive lock on the open file; False when another holder has it."""
    if sys.platform == "win32":  # pragma: no cover
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


class JSONLBackend(Backend):
    def __init__(self, directory: Path, *, fsync: bool) -> None:
        self.directory = directory
        self.fsync = fsync
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, session_id: str) -> Path:
        return self.directory / (session_id + _SUFFIX)

    def _sync(self, fd: int) -> None:
        if self.fsync:
            os.fsync(fd)

    def create(self, meta: Meta, messages: list[str]) -> None:
        lines = [_dumps(_header(meta))]
        lines += [_message_line(i, meta.created, text) for i, text in enumerate(messages)]
        lines += [_compaction_line(entry, meta.created) for entry in meta.compactions]
        path = self._path(meta.id)
        temp = self.directory / f".{meta.id}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                try:
                    _write_all(fd, b"".join(lines))
                    self._sync(fd)
                finally:
                    os.close(fd)
                try:
                    os.link(temp, path)  # publish whole, never over an existing session
                except FileExistsError:
                    raise SessionError(f"a session with id {meta.id!r} already exists") from None
            finally:
                os.unlink(temp)
            if self.fsync:
                _fsync_dir(self.directory)
        except OSError as exc:
            raise SessionError(f"could not write the session file of {meta.id!r} ({exc}); nothing was kept") from exc

    def list(self) -> tuple[builtins.list[Meta], builtins.list[SessionCorruptError]]:
        metas = []
        errors = []
        for path in sorted(self.directory.glob("*" + _SUFFIX)):
            if path.name.startswith("."):
                continue
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # deleted meanwhile
                continue
            try:
                meta = parse(data, str(path), messages=False).meta
                if meta.id != path.name[: -len(_SUFFIX)]:
                    raise SessionCorruptError(f"{path}: holds session {meta.id!r}, not the one of its name")
            except SessionCorruptError as exc:
                errors.append(exc)
                continue
            metas.append(meta)
        return metas, errors

    def load(self, session_id: str) -> tuple[Meta, builtins.list[Any]]:
        path = self._path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.directory}") from None
        parsed = parse(data, str(path))
        return parsed.meta, parsed.messages

    def _open_locked(self, session_id: str) -> int:
        path = self._path(session_id)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {session_id!r} in {self.directory}") from None
        try:
            if not _lock(fd):
                raise SessionLockedError(
                    f"session {session_id!r} is open for writing by another Session (in this process or "
                    "another); close that one first"
                )
            if os.fstat(fd).st_nlink == 0:  # deleted while we waited
                raise SessionNotFoundError(f"no session {session_id!r} in {self.directory}")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def acquire(self, session_id: str) -> tuple[Writer, Meta, builtins.list[Any]]:
        fd = self._open_locked(session_id)
        try:
            data = _read_fd(fd)
            parsed = parse(data, str(self._path(session_id)))
            if parsed.valid_length < len(data):  # drop the torn last line before appending
                os.ftruncate(fd, parsed.valid_length)
                self._sync(fd)
        except BaseException:
            os.close(fd)
            raise
        return _JSONLWriter(self, fd), parsed.meta, parsed.messages

    def delete(self, session_id: str) -> None:
        fd = self._open_locked(session_id)
        try:
            os.unlink(self._path(session_id))
            if self.fsync:
                _fsync_dir(self.directory)
        finally:
            os.close(fd)

    def break_lock(self, session_id: str) -> None:
        if not self._path(session_id).exists():
            raise SessionNotFoundError(f"no session {session_id!r} in {self.directory}")
        # Nothing to break: a writer's flock dies with its process.

    def close(self) -> None:
        pass


class _JSONLWriter(Writer):
    def __init__(self, backend: JSONLBackend, fd: int) -> None:
        self._backend = backend
        self._fd: int | None = fd
        self._broken: str | None = None

    def _write(self, data: bytes) -> None:
        """Append `data` durably, or leave the file as it was and raise `SessionError`.

        A write can fail part-way (a full disk, a file-size limit) and an fsync can fail after
        the bytes reached the file: either way the file is cut back to its length before this
        write, so the next record never lands on a torn line and nothing the caller was told
        failed can come back at a reload.
        """
        fd = self._fd
        if fd is None:
            raise SessionError("the session is closed")
        if self._broken is not None:
            raise SessionError(self._broken)
        length = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            self._backend._sync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, length)
                self._backend._sync(fd)
            except OSError as restore_error:
                self._broken = (
                    f"the session file could not be restored after a failed write ({restore_error}); "
                    "close the session and open it again (opening drops a torn last line)"
                )
                raise SessionError(f"could not write to the session file ({exc}); {self._broken}") from exc
            raise SessionError(f"could not write to the session file ({exc}); nothing of this write was kept") from exc

    def append(self, start: int, messages: list[str], time: int) -> None:
        # One write for all of them, its first line saying how many: stored together or not at all.
        size = len(messages)
        self._write(
            b"".join(_message_line(start + i, time, text, size if i == 0 else 1) for i, text in enumerate(messages))
        )

    def replace(self, messages: list[str], time: int) -> None:
        body = ",".join(messages)
        self._write(f'{{"type":"replace","time":{time},"messages":[{body}]}}\n'.encode())

    def compact(self, entry: JSONDict, time: int) -> None:
        self._write(_compaction_line(entry, time))

    def update(self, changes: JSONDict, time: int) -> None:
        self._write(_dumps({"type": "update", "time": time, **changes}))

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file releases its flock
