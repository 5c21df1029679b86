"""Retrying a model step: exponential backoff with jitter, honouring ``Retry-After``.

The runtime calls this inside its LLM step, so one durable step covers all attempts::

    result, usage = await generate_with_retry(adapter, messages, tools, llm_config)
    if result.type == "error":
        ...  # the plan fails the run with result.error

Transient errors are retried up to ``max_attempts`` calls in total; a permanent error,
or a transient one on the last attempt, becomes an ``ErrorStepResult`` instead of an
exception. Anything that is not an :class:`LLMError` (a bug) propagates unchanged.

With ``on_delta`` (a callback taking the attempt number and a delta) an adapter that
streams (:class:`StreamingLLMAdapter`) reports the answer's pieces as they arrive; the
attempt number tells the deltas of a failed try from those of the retry.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TypeGuard

from pydantic import BaseModel

from helix_dbos._deltas import Delta
from helix_dbos.llm.base import LLMAdapter, LLMError, StreamingLLMAdapter, TransientLLMError
from helix_dbos.types import ErrorStepResult, LLMConfig, Message, StepResult, ToolSpec, Usage

logger = logging.getLogger("helix_dbos.llm")


async def generate_with_retry(
    adapter: LLMAdapter,
    messages: list[Message],
    tools: list[ToolSpec],
    llm_config: LLMConfig,
    output_schema: type[BaseModel] | None = None,
    *,
    max_attempts: int = 5,
    base_delay: float = 0.5,
    max_delay: float = 20.0,
    on_delta: Callable[[int, Delta], None] | None = None,
) -> tuple[StepResult, Usage]:
    """Call ``adapter.generate_step``, retrying transient errors.

    On failure the ``Usage`` carries only the wall time spent on all attempts.

    Args:
        adapter: The model adapter.
        messages: The conversation, starting with the system message.
        tools: Everything the model may call.
        llm_config: The model and its settings.
        output_schema: The agent's output type, for adapters that use it.
        max_attempts: Calls at most, the first included.
        base_delay: Seconds before the first retry; doubled after each.
        max_delay: Seconds between two attempts at most.
        on_delta: With a streaming adapter, receives ``(attempt, delta)`` for each piece.

    Returns:
        What the model answered and its usage; after a permanent error, or transient
        errors on every attempt, an ``error`` step result.

    Raises:
        ValueError: ``max_attempts`` is below 1.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    started = time.perf_counter()
    attempt = 1
    while True:
        try:
            return await _one_call(adapter, messages, tools, llm_config, output_schema, attempt, on_delta)
        except TransientLLMError as error:
            if attempt == max_attempts:
                return _error_result(error, started, f" (gave up after {attempt} attempts)")
            delay = backoff_delay(attempt, base_delay, max_delay, error.retry_after)
            logger.warning(
                "LLM call failed (%s), attempt %d/%d; retrying in %.2fs", error, attempt, max_attempts, delay
            )
            await asyncio.sleep(delay)
            attempt += 1
        except LLMError as error:
            return _error_result(error, started)


async def _one_call(
    adapter: LLMAdapter,
    messages: list[Message],
    tools: list[ToolSpec],
    llm_config: LLMConfig,
    output_schema: type[BaseModel] | None,
    attempt: int,
    on_delta: Callable[[int, Delta], None] | None,
) -> tuple[StepResult, Usage]:
    if on_delta is None or not _streams(adapter):
        return await adapter.generate_step(messages, tools, llm_config, output_schema)
    return await adapter.stream_step(
        messages, tools, llm_config, output_schema, lambda delta: on_delta(attempt, delta)
    )


def _streams(adapter: LLMAdapter) -> TypeGuard[StreamingLLMAdapter]:
    """Whether ``adapter`` streams (has ``stream_step``): what ``isinstance(adapter,
    StreamingLLMAdapter)`` says, without the protocol check's cost on every model call."""
    return callable(getattr(adapter, "stream_step", None))


def backoff_delay(attempt: int, base_delay: float, max_delay: float, retry_after: float | None = None) -> float:
    """Seconds to wait after failed ``attempt`` (1-based).

    A provider's ``retry_after`` hint wins; otherwise ``base_delay * 2**(attempt-1)``
    with "equal jitter" (a random point in its upper half). Never more than ``max_delay``.

        >>> backoff_delay(3, base_delay=0.5, max_delay=20, retry_after=1.5)
        1.5
        >>> 1.0 <= backoff_delay(3, base_delay=0.5, max_delay=20) <= 2.0
        True

    Args:
        attempt: The failed attempt's number, from 1.
        base_delay: Seconds after the first attempt, before jitter.
        max_delay: Seconds at most.
        retry_after: The provider's hint in seconds, or None.

    Returns:
        Seconds to wait.
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), max_delay)
    ceiling = min(base_delay * 2 ** (attempt - 1), max_delay)
    return random.uniform(ceiling / 2, ceiling)


def _error_result(error: LLMError, started: float, suffix: str = "") -> tuple[StepResult, Usage]:
    result = ErrorStepResult(
        error=f"{error}{suffix}", error_type=error.error_type, should_stop=True, stop_reason="error"
    )
    return result, Usage(latency_ms=(time.perf_counter() - started) * 1000)
