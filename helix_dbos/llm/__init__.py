"""How the runtime talks to models: one protocol, a litellm adapter, and a scripted mock.

    from helix_dbos.llm import LiteLLMAdapter, MockLLMAdapter, generate_with_retry

    result, usage = await generate_with_retry(LiteLLMAdapter(), messages, tools, llm_config)

Importing this package does not import litellm; the adapter does on its first call.
"""

from helix_dbos.llm.base import LLMAdapter, LLMError, PermanentLLMError, StreamingLLMAdapter, TransientLLMError
from helix_dbos.llm.litellm_adapter import LiteLLMAdapter
from helix_dbos.llm.mock import LLMInput, MockExhaustedError, MockLLMAdapter, Responder
from helix_dbos.llm.retry import backoff_delay, generate_with_retry

__all__ = [
    "LLMAdapter",
    "LLMError",
    "LLMInput",
    "LiteLLMAdapter",
    "MockExhaustedError",
    "MockLLMAdapter",
    "PermanentLLMError",
    "Responder",
    "StreamingLLMAdapter",
    "TransientLLMError",
    "backoff_delay",
    "generate_with_retry",
]
