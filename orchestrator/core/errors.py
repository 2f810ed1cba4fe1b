"""Errors that cross layers: raised low (a model client, the embedded server) and caught high (a turn, a jorb
step, the CLI), so they live below both."""

from __future__ import annotations


class ModelEndpointError(RuntimeError):
    """The model endpoint cannot be reached or refused the request; the message says what to do."""
