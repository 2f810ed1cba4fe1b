"""A jorb (or mission) whose model is down tries again by itself: a wait that doubles from
`jorbs.model_retry_first_s` up to `model_retry_max_s`, for `model_retry_for_h` after the first failure; after that
the user decides (Approve tries again). Only a transient failure is retried (core/errors.ModelEndpointError
.transient): a refused key or a prompt too large fails the same way every time. The jorb's step is the one it
could not take: its event is kept."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from orchestrator.core.config import JorbsConfig

log = logging.getLogger(__name__)

MODEL_DOWN = "model_down"  # the pause's kind while a retry is due
MODEL_ERROR = "error"  # the pause's kind once the jorb waits for the user
RETRY = "retry"  # the resume value's type of an automatic try (the sweep in server/services.py)
MODEL_UP = {"model_down_since": None, "model_failures": 0, "retry_at": None}  # a step the model answered


def model_down(cfg: JorbsConfig, jorb_id: str, down_since: float | None, failures: int,
               error: Exception) -> tuple[str, str, dict[str, Any]]:
    """After a failed model call of a jorb or mission that had failed `failures` times since `down_since`: the
    pause's kind (MODEL_DOWN while a try is due, else MODEL_ERROR), what it says, and the state's new fields."""
    now = time.time()
    since = down_since or now
    failures += 1
    transient = bool(getattr(error, "transient", False))
    retry_at = next_try(cfg, since, failures, now) if transient else None
    log.warning("jorb %s: the model is not available (%s); %s", jorb_id, error,
                f"trying again in {retry_at - now:.0f} s" if retry_at else "waiting for the user")
    gave_up = transient and retry_at is None and cfg.model_retry_for_h > 0
    return (MODEL_DOWN if retry_at is not None else MODEL_ERROR,
            pause_reason(error, retry_at, failures, since, now, gave_up=gave_up),
            {"model_down_since": since, "model_failures": failures, "retry_at": retry_at})


def next_try(cfg: JorbsConfig, down_since: float, failures: int, now: float) -> float | None:
    """The unix time of the next try after `failures` failed ones since `down_since`; None once the model has
    been down for `model_retry_for_h` (or retries are off)."""
    if cfg.model_retry_for_h <= 0 or now - down_since >= cfg.model_retry_for_h * 3600:
        return None
    wait = min(cfg.model_retry_first_s * 2 ** min(max(failures - 1, 0), 32), cfg.model_retry_max_s)
    return now + wait


def pause_reason(error: Exception, retry_at: float | None, failures: int, down_since: float, now: float, *,
                 gave_up: bool = False) -> str:
    """What the user reads on the paused jorb. `gave_up`: it stopped trying by itself after model_retry_for_h."""
    if retry_at is not None:
        at = datetime.fromtimestamp(retry_at).astimezone().strftime("%H:%M:%S")
        tries = "1 try" if failures == 1 else f"{failures} tries"
        return (f"The model is not available: {error} Jarvis tries again by itself at {at} while `jarvis run` is "
                f"up ({tries} failed so far); approve to try now, or cancel the jorb.")
    if gave_up:
        hours = (now - down_since) / 3600
        return (f"The model is not available: {error} It has failed {failures} times over {hours:.1f} h, so the jorb "
                "stopped trying by itself (jorbs.model_retry_for_h). Approve to try again.")
    return f"The model is not available: {error} Approve to try again."


def is_due(item: Mapping[str, Any], now: float | None = None) -> bool:
    """A pending item of a jorb that is a model-down pause whose next try has come."""
    at = item.get("retry_at")
    return (item.get("type") == "jorb_pause" and item.get("kind") == MODEL_DOWN and isinstance(at, int | float)
            and at <= (time.time() if now is None else now))
