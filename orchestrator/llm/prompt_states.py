"""The built-in model's server keeps more than its last prompt: a few evaluated prompts' states, restored when a
request continues one of them ([25]: the cache reused).

llama.cpp keeps one evaluated prompt (its KV cache) and reuses it only up to the first token a new request
changes. One server serves every caller of the built-in model: each chat thread, a jorb working in the background,
the summary of a long thread. When two of them alternate, each request finds the other's prompt cached and reads
its whole own prompt again: in the fuzz of tests/test_real_model.py a jorb the user approved made three chat turns
read about 900 tokens from scratch and wait for its own 2,000-token requests (17-40 s a turn instead of 3 s).

So after each request the handler saves the state of the evaluated sequence (its KV cells, about 18 MB for 800
tokens of SmolLM2-135M, in 15 ms), keyed by its tokens; before a request it restores the saved state that shares
the longest beginning with the prompt, when that is longer than what the server holds (a few ms against about
a second per hundred tokens read here). A state another one extends is dropped (the longer serves both), and the
oldest go first beyond STATE_BYTES. Measured in-process: a prompt read in 3.7 s was answered in 0.3 s after another
prompt had been evaluated in between, with the same greedy answer as when read from scratch.

Loaded only in the embedded server's process (it imports llama_cpp), by llm/llama_handler.py.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np

STATE_BYTES = 256 * 2**20  # at most, for the saved states of one model (about 11,000 tokens of SmolLM2-135M)
MIN_GAIN = 32  # tokens: restoring costs milliseconds, reading 32 tokens about a third of a second on 2 cores
SEQUENCE = 0  # llama-cpp-python evaluates every prompt as sequence 0


def common_prefix(a: Any, b: Any) -> int:
    """How many first tokens two token sequences share (numpy: a thread's prompt is thousands of tokens, and the
    handler asks this for several heads of it against each saved state)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


@dataclass(eq=False)  # one saved state is itself only (its ids are an array)
class _Saved:
    ids: np.ndarray
    data: Any  # a ctypes byte array
    size: int


class PromptStates:
    """The saved states of one model's context (the handler keeps one per model; the server answers one request
    at a time, so no lock)."""

    def __init__(self, capacity: int = STATE_BYTES):
        self.capacity = capacity
        self._saved: list[_Saved] = []  # oldest first

    def longest(self, ids: list[int]) -> int:
        """How many of `ids`' first tokens a saved state holds."""
        wanted = np.asarray(ids)
        return max((common_prefix(s.ids, wanted) for s in self._saved), default=0)

    def restore(self, llama: Any, ids: list[int]) -> None:
        """Make the context hold the saved state sharing most of `ids`' beginning, when it shares MIN_GAIN tokens
        more than what the context holds now."""
        wanted = np.asarray(ids)
        held = common_prefix(llama._input_ids, wanted)
        shared, best = max(((common_prefix(s.ids, wanted), s) for s in self._saved), key=lambda p: p[0],
                           default=(0, None))
        if best is None or shared < held + MIN_GAIN:
            return
        if not llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, best.data, best.size, SEQUENCE):
            llama.reset()  # the context's cells are unknown now: the prompt is read from scratch
            llama._ctx.kv_cache_clear()
            return
        llama.n_tokens = len(best.ids)
        llama.input_ids[:len(best.ids)] = best.ids
        llama._requires_eval = True  # the logits are not restored: generate evaluates at least one token again
        self._saved.remove(best)
        self._saved.append(best)

    def save(self, llama: Any) -> None:
        """Keep the context's evaluated sequence (after a request)."""
        ids = np.array(llama._input_ids)  # a copy: the context's array changes with the next request
        if len(ids) < MIN_GAIN:
            return
        for s in self._saved:
            if common_prefix(ids, s.ids) == len(ids):  # a saved state holds all of it already
                self._saved.remove(s)
                self._saved.append(s)
                return
        ctx = llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, SEQUENCE)
        if not size or size > self.capacity:
            return
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, data, size, SEQUENCE)
        if not written:
            return
        self._saved = [s for s in self._saved if common_prefix(s.ids, ids) < len(s.ids)]  # this one serves those
        self._saved.append(_Saved(ids, data, written))
        while sum(s.size for s in self._saved) > self.capacity:
            self._saved.pop(0)
