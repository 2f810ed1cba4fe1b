"""Text embeddings from the configured OpenAI-compatible endpoint (`models.embeddings`), when there is one.

Jan, Ollama, llama.cpp's server and OpenAI all serve `/v1/embeddings`. Without a configured endpoint, or when
it does not answer, callers get None and fall back to keyword search: that is said once in the log, not raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.core import secrets
from orchestrator.core.owned_transport import owned_client, server_users
from orchestrator.core.config import EmbeddingsConfig, Settings
from .answer_bounds import bound_client

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

BATCH = 64
RETRY_AFTER_S = 300.0  # an endpoint that failed is asked again after this long


class Embedder:
    def __init__(self, cfg: EmbeddingsConfig | None):
        self.cfg = cfg
        self._client = None
        self._down_until = 0.0
        self._said: set[str] = set()
        self._lock = threading.Lock()

    @property
    def model(self) -> str | None:
        return self.cfg.model if self.cfg else None

    def _say_once(self, key: str, level: int, message: str, *args: object) -> None:
        if key not in self._said:
            self._said.add(key)
            log.log(level, message, *args)

    def available(self) -> bool:
        if self.cfg is None:
            self._say_once("none", logging.INFO, "document index: no embeddings endpoint (models.embeddings is not "
                           "set); search uses keywords only")
            return False
        return time.monotonic() >= self._down_until

    def _get_client(self):
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                assert self.cfg is not None
                api_key = secrets.resolve(self.cfg.api_key, what="models.embeddings.api_key") or "none"
                http = bound_client(owned_client(server_users(self.cfg), timeout=self.cfg.timeout_s, trust_env=False),
                                    self.cfg,
                                    self.cfg.base_url, "embeddings")
                self._client = OpenAI(base_url=self.cfg.base_url, api_key=api_key, timeout=self.cfg.timeout_s,
                                      max_retries=0, http_client=http)
            return self._client

    def embed(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        """Unit-length float32 vectors, one per text; None when no endpoint can give them now."""
        if not texts or not self.available():
            return None
        out: list[np.ndarray] = []
        try:
            client = self._get_client()
            for start in range(0, len(texts), BATCH):
                batch = [t if t.strip() else "." for t in texts[start:start + BATCH]]
                resp = client.embeddings.create(model=self.cfg.model, input=batch)  # type: ignore[union-attr]
                out.extend(vectors_of(resp.data, len(batch), out[0].shape[0] if out else None))
        except Exception as exc:  # noqa: BLE001 - any failure: keyword search for a while, said once
            self._down_until = time.monotonic() + RETRY_AFTER_S
            self._say_once("down", logging.WARNING, "the embeddings endpoint %s gave no vectors (%s); search "
                           "uses keywords only for now", self.cfg.base_url if self.cfg else "?",
                           f"{type(exc).__name__}: {str(exc)[:150]}")
            return None
        self._said.discard("down")
        return out


def vectors_of(items: Sequence[object], asked: int, dims: int | None = None) -> list[np.ndarray]:
    """The unit vectors of one answer, in the order the texts were sent, or ValueError saying what is wrong with
    it: a vector given to the wrong text (too few, too many, an index twice) or one that is not a vector (not
    numbers, NaN or infinity, another length than the others, all zeros) would mislead every search after it."""
    import numpy as np

    if len(items) != asked:
        raise ValueError(f"{len(items)} vectors for {asked} texts")
    by_index = {getattr(item, "index", None): getattr(item, "embedding", None) for item in items}
    if set(by_index) != set(range(asked)):  # a duplicate index leaves one missing
        raise ValueError(f"the vectors' indexes do not number the {asked} texts 0 to {asked - 1}")
    out = []
    for i in range(asked):
        try:
            vec = np.asarray(by_index[i], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"vector {i} is not a list of numbers") from exc
        dims = dims if dims is not None else (vec.shape[0] if vec.ndim == 1 else None)
        if vec.ndim != 1 or not vec.shape[0] or vec.shape[0] != dims:
            raise ValueError(f"vector {i} has shape {vec.shape}, the others {dims} numbers")
        norm = float(np.linalg.norm(vec))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"vector {i} has no direction (NaN, infinite or all zeros)")
        out.append(vec / norm)
    return out


def make_embedder(settings: Settings) -> Embedder:
    return Embedder(settings.models.embeddings)
