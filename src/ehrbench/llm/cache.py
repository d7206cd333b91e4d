"""A persistent cache of model responses, so that a rerun with the same prompts makes no HTTP call at all (and
returns exactly the text the first run got, even at a temperature above zero).

One SQLite file (stdlib sqlite3, WAL journal): any number of readers, writers wait for each other. Keys are the
sha256 of the request as JSON: provider, model, temperature, n and the messages for chat; provider, model and the
text for embeddings. The base URL is not part of a key, so the same model served elsewhere reuses the cache.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from ehrbench.llm.chat import ChatModel, Embedder, Message

_BUSY_TIMEOUT_S = 30.0


def request_key(*parts: Any) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def chat_key(provider: str, model: str, temperature: float, n: int, messages: list[Message]) -> str:
    return request_key("chat", provider, model, temperature, n, messages)


def embedding_key(provider: str, model: str, text: str) -> str:
    return request_key("embedding", provider, model, text)


class ResponseCache:
    """JSON values by key in one SQLite file (created with its folder on first use)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as con, con:
            con.execute("pragma journal_mode=wal")
            con.execute("create table if not exists responses (key text primary key, value text not null)")

    def get(self, key: str) -> Any | None:
        with closing(self._connect()) as con:
            row = con.execute("select value from responses where key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with closing(self._connect()) as con, con:
            con.execute("insert or replace into responses (key, value) values (?, ?)", (key, json.dumps(value)))

    def _connect(self) -> sqlite3.Connection:
        # a connection per call: safe from any thread, and nothing holds the file between calls
        return sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S)


class CachedChat:
    """A ChatModel that answers from the cache and asks `model` only on a miss."""

    def __init__(self, model: ChatModel, cache: ResponseCache):
        self.provider, self.model = model.provider, model.model
        self._inner, self._cache = model, cache

    def complete(self, messages: list[Message], *, temperature: float, n: int = 1) -> list[str]:
        key = chat_key(self.provider, self.model, temperature, n, messages)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        replies = self._inner.complete(messages, temperature=temperature, n=n)
        self._cache.put(key, replies)
        return replies


class CachedEmbeddings:
    """An Embedder that caches one vector per text and sends only the texts it has not seen, in one request."""

    def __init__(self, embedder: Embedder, cache: ResponseCache):
        self.provider, self.model = embedder.provider, embedder.model
        self._inner, self._cache = embedder, cache

    def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [embedding_key(self.provider, self.model, text) for text in texts]
        vectors = {key: self._cache.get(key) for key in keys}
        missing = list(dict.fromkeys(text for text, key in zip(texts, keys, strict=True) if vectors[key] is None))
        for text, vector in zip(missing, self._inner.embed(missing) if missing else [], strict=True):
            key = embedding_key(self.provider, self.model, text)
            self._cache.put(key, vector)
            vectors[key] = vector
        return [vectors[key] for key in keys]
