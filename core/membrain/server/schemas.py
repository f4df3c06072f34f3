"""The bodies of the HTTP API that are not an operation's: health, errors, encoded answers.

An operation's request is its request model (:mod:`membrain.api.requests`) and its answer its
result, as :meth:`Operation.dump_result <membrain.api.operations.Operation.dump_result>` encodes it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.responses import Response

__all__ = ["ErrorBody", "HealthResponse", "ModelResponse"]


class HealthResponse(BaseModel):
    """The server is up."""

    status: str = "ok"
    version: str


class ErrorBody(BaseModel):
    """Every error response: one line saying what went wrong, and the error's class."""

    error: str
    type: str


class ModelResponse(Response):
    """A model's JSON, encoded once by pydantic.

    For the busiest answers (search, context): FastAPI would dump the returned model to Python
    values, validate them against the response model again and encode them (1.4 ms for ten
    search hits, against 0.05 ms for the model's own JSON). Routes returning it name their
    ``response_model`` so the schema is unchanged.
    """

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """``content`` (a pydantic model) as JSON bytes."""
        if not isinstance(content, BaseModel):
            raise TypeError(f"ModelResponse renders a pydantic model, not {type(content).__name__}")
        return content.model_dump_json().encode("utf-8")
