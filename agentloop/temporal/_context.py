"""Context by reference: the transcript of a durable run lives in a store, not in every model call.

Without it each model activity carries the whole transcript, so a workflow's history grows with
the square of its turns. With a `ContextStore` on the `TemporalAgent`, a model activity gets the
key of the context its previous call ended with and only the messages added since; it rebuilds
the context from the store, calls the model, stores the new context (the old one's key, the new
messages and the answer) and returns the answer with the new context's key. The history grows by
what each turn adds.

The store holds content-addressed blobs: a blob's key is the SHA-256 of its bytes, so writing it
again (a retried activity, another worker) is harmless and a blob read back is checked. A blob
is `{"base": key or null, "messages": [...]}`: a chain of deltas, flattened into one
blob every `_MAX_DEPTH` links so that a worker that has none of it cached reads a few blobs, not
one per turn. Each worker keeps the contexts it built in a small LRU cache; the store is read on
a miss. The store is a cache of what the workflow holds: a blob it cannot give back (lost,
evicted, another worker's `MemoryContextStore`) makes the workflow send the whole transcript
again, never fail the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from .._types._messages import Message
from .._wire._decode import from_json
from .._wire._encode import to_json
from .._wire._json_text import encode_json

__all__ = (
    "CONTEXT_MISSING",
    "ContextStore",
    "FileContextStore",
    "MemoryContextStore",
    "StoredContexts",
    "STORED_THRESHOLD",
    "check_context_store",
    "payload_storage",
)

CONTEXT_MISSING = "AgentLoopContextMissing"
"""The type of the (non-retryable) error a model activity raises for a context the store lacks."""

STORED_THRESHOLD = 256 * 1024
"""With a store, a payload of this many bytes or more is kept in it and its history holds the key
(Temporal's own default for external storage)."""

_MAX_DEPTH = 16
"""A chain longer than this is written flattened (one blob with every message)."""
_CACHE_SIZE = 256
_HEX = frozenset("0123456789abcdef")


@runtime_checkable
class ContextStore(Protocol):
    """Where a worker keeps the transcripts of durable runs (shared by every worker of the agent).

    Keys are SHA-256 hex digests of the data: `put` may be called again with the same key and
    data (make it idempotent), and `get` returns None for a key it does not have. An S3 bucket,
    a Redis or a database table fit; `FileContextStore` is a shared directory.
    """

    async def put(self, key: str, data: bytes) -> None:
        """Keep `data` under `key`."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The data kept under `key`, or None."""
        ...


class MemoryContextStore:
    """A store in this process's memory: for one worker process (tests, a single-process deploy).

    Another worker process does not see it: a model call that lands there makes the workflow
    send the whole transcript (correct, but the history grows as without a store).
    """

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    async def put(self, key: str, data: bytes) -> None:
        self._blobs[key] = data

    async def get(self, key: str) -> bytes | None:
        return self._blobs.get(key)

    def __len__(self) -> int:
        return len(self._blobs)


class FileContextStore:
    """A store in a directory, one file per blob: shared by the workers that see the directory.

    Writes are atomic (a temporary file renamed into place). Nothing is deleted: remove files of
    finished runs as your retention requires (by age: a file is never rewritten with other data).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"FileContextStore needs a directory path, got {type(directory).__name__}")
        self.directory = anyio.Path(directory)

    def __repr__(self) -> str:
        return f"FileContextStore({str(self.directory)!r})"

    def _path(self, key: str) -> anyio.Path:
        if len(key) != 64 or not set(key) <= _HEX:
            raise ValueError(f"a context key is a SHA-256 hex digest, got {key!r}")
        return self.directory / key

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if await path.exists():
            return
        await self.directory.mkdir(parents=True, exist_ok=True)
        await anyio.to_thread.run_sync(_write_atomically, str(path), data)

    async def get(self, key: str) -> bytes | None:
        try:
            return await self._path(key).read_bytes()
        except FileNotFoundError:
            return None


def _write_atomically(path: str, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def check_context_store(store: object) -> None:
    if not isinstance(store, ContextStore):
        raise TypeError(
            f"context_store must have async put(key, data) and get(key) methods (a ContextStore), "
            f"got {type(store).__name__}"
        )


class StoredContexts:
    """A worker's side of context by reference: rebuilds contexts from the store, writes new ones."""

    def __init__(self, store: ContextStore) -> None:
        self.store = store
        self._cache: OrderedDict[str, tuple[tuple[Message, ...], int]] = OrderedDict()
        self.cache_size = _CACHE_SIZE

    async def load(self, key: str | None) -> tuple[tuple[Message, ...], int]:
        """The messages of the context `key` names and the length of its chain (None: empty)."""
        if key is None:
            return (), 0
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        data = await self.store.get(key)
        if data is None or hashlib.sha256(data).hexdigest() != key:
            raise ApplicationError(
                f"context {key} is not in the store ({'missing' if data is None else 'corrupt'})",
                type=CONTEXT_MISSING,
                non_retryable=True,
            )
        node = json.loads(data)
        base, depth = await self.load(node["base"])
        loaded = ((*base, *(from_json(m) for m in node["messages"])), depth + 1)
        self._remember(key, loaded)
        return loaded

    async def save(
        self, base: str | None, depth: int, added: Sequence[Mapping[str, Any]], messages: tuple[Message, ...]
    ) -> str:
        """Write the context `messages` (the base's messages, then `added`, as JSON); its key."""
        if depth >= _MAX_DEPTH:
            node: dict[str, Any] = {"base": None, "messages": [to_json(m) for m in messages]}
            depth = 0
        else:
            node = {"base": base, "messages": list(added)}
        data = encode_json(node).encode()
        key = hashlib.sha256(data).hexdigest()
        await self.store.put(key, data)
        self._remember(key, (messages, depth + 1))
        return key

    def _remember(self, key: str, value: tuple[tuple[Message, ...], int]) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


class _StoreDriver(StorageDriver):
    """Temporal's external payload storage over a `ContextStore`: a large payload is kept under
    the SHA-256 of its bytes (so another write of it is harmless, and a read is checked), and the
    history holds the key."""

    def __init__(self, store: ContextStore) -> None:
        self._store = store

    def name(self) -> str:
        return "agentloop.context_store"

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            data = payload.SerializeToString(deterministic=True)
            key = hashlib.sha256(data).hexdigest()
            await self._store.put(key, data)
            claims.append(StorageDriverClaim(claim_data={"key": key}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        payloads = []
        for claim in claims:
            key = claim.claim_data["key"]
            data = await self._store.get(key)
            if data is None or hashlib.sha256(data).hexdigest() != key:
                state = "missing" if data is None else "corrupt"
                raise ValueError(f"payload {key} is not in the context store ({state}): keep it as long as its run")
            payloads.append(Payload.FromString(data))
        return payloads


def payload_storage(store: ContextStore, threshold: int = STORED_THRESHOLD) -> ExternalStorage:
    """Temporal's `ExternalStorage` that keeps payloads of `threshold` bytes or more in `store`."""
    check_context_store(store)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ValueError(f"threshold must be a positive number of bytes, got {threshold!r}")
    return ExternalStorage(drivers=[_StoreDriver(store)], payload_size_threshold=threshold)
