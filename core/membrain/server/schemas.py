"""The bodies of the HTTP API that are not an operation's: health and errors.

An operation's request is its request model (:mod:`membrain.api.requests`) and its answer its
result, as :meth:`Operation.dump_result <membrain.api.operations.Operation.dump_result>` encodes it.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["ErrorBody", "HealthResponse"]


class HealthResponse(BaseModel):
    """The server is up."""

    status: str = "ok"
    version: str


class ErrorBody(BaseModel):
    """Every error response: one line saying what went wrong, and the error's class."""

    error: str
    type: str
