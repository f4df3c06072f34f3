"""Ask a model for JSON, check the answer, and send what is wrong back until it is right.

:func:`ask` is the loop every model step shares (entities, facts, the profile's changes): the
answer is parsed (:func:`~membrain.extraction.jsonout.parse_json_object`), the step's ``check``
turns it into a result or raises :class:`Invalid` with the problems, and the problems go back
to the model in the next prompt; a model that fails (a timeout, a refusal to answer) is asked
again after a backoff. After ``attempts`` calls :class:`~membrain.api.errors.ExtractionError` is
raised with the last raw answer, so the caller leaves what it was doing undone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from membrain.api.errors import ExtractionError
from membrain.extraction.jsonout import MalformedOutput, parse_json_object
from membrain.extraction.llm import LLMCallError, LLMClient

__all__ = ["Invalid", "ask", "feedback"]

log = logging.getLogger("membrain.extraction")

T = TypeVar("T")


class Invalid(ValueError):
    """The answer parsed but failed a check; ``problems`` go back to the model."""

    def __init__(self, problems: list[str], raw: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.raw = raw


def feedback(problems: Sequence[str]) -> str:
    """The text added to the next prompt: what was wrong with the previous answer."""
    listed = "\n".join(f"- {p}" for p in problems[:12])
    return f"\nYour previous answer could not be used:\n{listed}\nAnswer again, fixing these.\n"


def ask(
    client: LLMClient,
    system: str,
    prompt: Callable[[str], str],
    check: Callable[[dict[str, Any], str, bool], T],
    *,
    key: str,
    schema: dict[str, Any],
    what: str,
    attempts: int,
    backoff: float = 0.0,
    message_ids: tuple[str, ...] = (),
) -> T:
    """The checked result of asking ``client`` until an answer passes ``check``.

    Args:
        client: The model.
        system: The system prompt.
        prompt: The prompt, given the feedback on the previous answer (``""`` at first).
        check: ``(data, raw, final)`` to the result; raises :class:`Invalid` to retry
            (``final`` is true on the last attempt).
        key: The key the answer's JSON object must have.
        schema: The JSON schema of the answer (for models with native structured output).
        what: What is asked, for messages ("entity extraction", "profile update").
        attempts: Calls at most, the first included.
        backoff: Seconds before asking again after the model itself failed (doubling).
        message_ids: The messages the answer is about (carried by the error).

    Raises:
        ExtractionError: no answer passed within ``attempts`` calls.
    """
    said = ""
    raw = ""

    def wait(state: RetryCallState) -> float:
        failed = state.outcome.exception() if state.outcome else None
        if isinstance(failed, LLMCallError):
            return float(backoff * 2 ** (state.attempt_number - 1))
        return 0.0

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        retry=retry_if_exception_type((MalformedOutput, Invalid, LLMCallError)),
        wait=wait,
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                final = attempt.retry_state.attempt_number >= attempts
                reply = client.call(system, prompt(said), schema=schema)
                raw = reply.text
                try:
                    data = reply.parsed or parse_json_object(raw, required_key=key)
                    if key not in data:
                        raise MalformedOutput(f"missing key '{key}'", raw)
                    return check(data, raw, final)
                except MalformedOutput as exc:
                    said = feedback([f"the answer was unusable ({exc.reason})"])
                    log.info("%s: %s, retrying", what, exc.reason)
                    raise
                except Invalid as exc:
                    said = feedback(exc.problems)
                    log.info("%s invalid: %s", what, exc)
                    raise
    except (MalformedOutput, Invalid, LLMCallError) as exc:
        reason = getattr(exc, "reason", None) or str(exc)
        raise ExtractionError(
            f"{what} failed after {attempts} attempts: {reason}",
            raw_output=raw,
            message_ids=message_ids,
            retryable=True,
        ) from exc
    raise AssertionError("unreachable: tenacity either returns or reraises")
