"""The one protocol the runtime uses to talk to a model, and the errors it may raise.

Any object with a matching ``generate_step`` is an adapter::

    class EchoAdapter:
        async def generate_step(self, messages, tools, llm_config, output_schema=None):
            return TextStepResult(content=messages[-1].content, should_stop=True), Usage()

An adapter raises :class:`TransientLLMError` for failures worth retrying (rate limits,
timeouts, 5xx, dropped connections) and :class:`PermanentLLMError` for failures that
will not go away by themselves (bad key, bad request, context window exceeded, unknown
model). :func:`helix_dbos.llm.generate_with_retry` turns both into an
``ErrorStepResult`` when it gives up.

An adapter that can stream also has ``stream_step``: the same call, reporting each piece
of the answer to ``on_delta`` as it arrives (``helix_dbos._deltas``) and returning the
whole answer at the end, as ``generate_step`` would.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from helix_dbos._deltas import DeltaSink
from helix_dbos.errors import HelixError
from helix_dbos.types import LLMConfig, Message, StepResult, ToolSpec, Usage


@runtime_checkable
class LLMAdapter(Protocol):
    """Turns one conversation into one model step.

    ``messages`` start with the system message (built by the caller); ``tools`` is
    everything the model may call, including ``__finish__`` and ``subagent__*`` tools; the
    agent's own specs, shared by its model calls: read them, copy what you change.
    ``output_schema`` is the agent's output type, for adapters that use a provider's
    native structured output; adapters that finish through ``__finish__`` ignore it.
    """

    async def generate_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None = None,
    ) -> tuple[StepResult, Usage]:
        """One model call.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call; shared, so copy what you change.
            llm_config: The model and its settings.
            output_schema: The agent's output type, for native structured output.

        Returns:
            What the model answered, and the call's usage.

        Raises:
            TransientLLMError: The call failed in a way worth retrying.
            PermanentLLMError: The call failed in a way retrying will not fix.
        """


@runtime_checkable
class StreamingLLMAdapter(LLMAdapter, Protocol):
    """An adapter that also streams: ``stream_step`` calls ``on_delta`` for each text,
    reasoning or tool-call-argument piece in order, then returns what ``generate_step``
    would. ``on_delta`` returns at once; the adapter need not guard against it."""

    async def stream_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None,
        on_delta: DeltaSink,
    ) -> tuple[StepResult, Usage]:
        """One streamed model call.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call; shared, so copy what you change.
            llm_config: The model and its settings.
            output_schema: The agent's output type, for native structured output.
            on_delta: Receives each piece in order; returns at once.

        Returns:
            What the model answered, and the call's usage.

        Raises:
            TransientLLMError: The call failed in a way worth retrying.
            PermanentLLMError: The call failed in a way retrying will not fix.
        """


class LLMError(HelixError):
    """A model call failed.

    ``error_type`` names the underlying failure (e.g. litellm's ``RateLimitError``),
    ``status_code`` is the provider's HTTP status when there was one.

    Args:
        message: What failed.
        error_type: The underlying failure's name; default this class's name.
        status_code: The provider's HTTP status, when there was one.
    """

    def __init__(self, message: str, *, error_type: str | None = None, status_code: int | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type or type(self).__name__
        self.status_code = status_code


class TransientLLMError(LLMError):
    """Worth retrying: rate limit (429), timeout, 5xx, connection error.

    ``retry_after`` is the provider's hint in seconds (``Retry-After``), if it sent one.

    Args:
        message: What failed.
        error_type: The underlying failure's name; default this class's name.
        status_code: The provider's HTTP status, when there was one.
        retry_after: The provider's ``Retry-After`` hint in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, error_type=error_type, status_code=status_code)
        self.retry_after = retry_after


class PermanentLLMError(LLMError):
    """Retrying will not help: auth (401/403), bad request (400), context window, not found."""
