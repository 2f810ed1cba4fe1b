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
from orchestrator.core.config import EmbeddingsConfig, Settings

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
                self._client = OpenAI(base_url=self.cfg.base_url, api_key=api_key, timeout=self.cfg.timeout_s,
                                      max_retries=0)
            return self._client

    def embed(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        """Unit-length float32 vectors, one per text; None when no endpoint can give them now."""
        import numpy as np

        if not texts or not self.available():
            return None
        out: list[np.ndarray] = []
        try:
            client = self._get_client()
            for start in range(0, len(texts), BATCH):
                batch = [t if t.strip() else "." for t in texts[start:start + BATCH]]
                resp = client.embeddings.create(model=self.cfg.model, input=batch)  # type: ignore[union-attr]
                for item in sorted(resp.data, key=lambda d: d.index):
                    vec = np.asarray(item.embedding, dtype=np.float32)
                    norm = float(np.linalg.norm(vec)) or 1.0
                    out.append(vec / norm)
        except Exception as exc:  # noqa: BLE001 - any failure: keyword search for a while, said once
            self._down_until = time.monotonic() + RETRY_AFTER_S
            self._say_once("down", logging.WARNING, "document index: the embeddings endpoint %s did not answer "
                           "(%s); search uses keywords only for now", self.cfg.base_url if self.cfg else "?",
                           f"{type(exc).__name__}: {str(exc)[:150]}")
            return None
        self._said.discard("down")
        return out


def make_embedder(settings: Settings) -> Embedder:
    return Embedder(settings.models.embeddings)
