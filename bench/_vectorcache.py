"""Document vectors kept in an SQLite file across benchmark runs, so each text is embedded once."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessonbank.retrieval.embedders import Embedder

DEFAULT_PATH = Path(__file__).resolve().parent / "results" / "cache" / "vectors.sqlite"


class CachedEmbedder:
    """An embedder whose document vectors are kept in an SQLite file across runs (queries are never cached).

    Embedding 100k lessons with MiniLM takes long on a small machine; the banks of every size and every
    run share the same texts, so each text is embedded once. Same ``name`` as the wrapped embedder, so the
    bank cannot tell. ``seconds`` and ``computed`` say what the wrapped embedder actually did.
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (name TEXT, hash TEXT, vector BLOB, PRIMARY KEY (name, hash))"
        )
        self.seconds = 0.0
        self.computed = 0
        self.cached = 0

    def __getattr__(self, attribute: str) -> Any:
        # Whatever else the bank asks of an embedder (its fusion weight, its query cache) is the inner one's.
        if attribute == "inner":
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        keys = [hashlib.sha256(text.encode()).hexdigest() for text in texts]
        found: dict[str, Any] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self.db.execute(
                f"SELECT hash, vector FROM vectors WHERE name = ? AND hash IN ({marks})", [self.name, *chunk]
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        todo = [i for i, key in enumerate(keys) if key not in found]
        self.cached += len(keys) - len(todo)
        if todo:
            start_s = time.perf_counter()
            computed = self.inner.embed_documents([texts[i] for i in todo])
            self.seconds += time.perf_counter() - start_s
            self.computed += len(todo)
            rows = [
                (self.name, keys[i], np.asarray(v, dtype=np.float32).tobytes())
                for i, v in zip(todo, computed, strict=True)
            ]
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
            self.db.commit()
            for i, vector in zip(todo, computed, strict=True):
                found[keys[i]] = vector
        return (
            np.stack([found[key] for key in keys]).astype(np.float32)
            if keys
            else np.zeros((0, self.dim), np.float32)
        )

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def take_counts(self) -> dict[str, Any]:
        counts = {
            "computed": self.computed,
            "from_cache": self.cached,
            "embed_seconds": round(self.seconds, 2),
        }
        if self.computed:
            counts["computed_per_s"] = round(self.computed / max(self.seconds, 1e-9), 1)
        self.seconds, self.computed, self.cached = 0.0, 0, 0
        return counts
