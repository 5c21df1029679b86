"""Sorting litellm's exceptions into transient (retry) and permanent (give up).

    try:
        response = await litellm.acompletion(...)
    except Exception as exc:
        raise classify_litellm_error(exc) from exc

The rule, by the provider's HTTP status (litellm maps every provider to one):

* 408, 409, 429 and 5xx are transient, as are timeouts and connection errors;
* 429 with ``insufficient_quota`` is permanent (billing, not load);
* every other 4xx is permanent (400 bad request, 401/403 auth, 404 model not found,
  422, and litellm's ``ContextWindowExceededError``);
* a failure inside litellm itself (an ``ImportError``, ``TypeError``, ...), which litellm
  reports as a 500 ``APIConnectionError``, is permanent: retrying cannot fix it;
* so is an error the provider's SDK raised before sending anything (the OpenAI SDK's
  "Missing credentials" when no API key is set, which litellm reports as a 500).

``Retry-After`` / ``retry-after-ms`` response headers become ``retry_after`` seconds.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from typing import Any

from helix_dbos.llm.base import LLMError, PermanentLLMError, TransientLLMError

_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_LOCAL_FAILURES = (ImportError, TypeError, AttributeError, NameError, NotImplementedError)
_NETWORK_FAILURES = (TimeoutError, asyncio.TimeoutError, ConnectionError)


def classify_litellm_error(exc: BaseException) -> LLMError:
    """The :class:`LLMError` to raise for an exception from ``litellm.acompletion``."""
    error_type = type(exc).__name__
    status = _status_code(exc)
    message = str(exc)
    if _caused_by_local_failure(exc) or _raised_before_sending(exc):
        return PermanentLLMError(message, error_type=error_type, status_code=status)
    if _is_transient(exc, status, message):
        retry_after = _retry_after_seconds(_response_headers(exc))
        return TransientLLMError(message, error_type=error_type, status_code=status, retry_after=retry_after)
    return PermanentLLMError(message, error_type=error_type, status_code=status)


def _is_transient(exc: BaseException, status: int | None, message: str) -> bool:
    if status == 429 and "insufficient_quota" in message:
        return False
    if status is None:
        return isinstance(exc, _NETWORK_FAILURES)
    return status in _TRANSIENT_STATUSES or status >= 500


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _caused_by_local_failure(exc: BaseException) -> bool:
    return any(isinstance(e, _LOCAL_FAILURES) for e in _chain(exc))


def _raised_before_sending(exc: BaseException) -> bool:
    """Whether the chain holds the OpenAI SDK's base ``OpenAIError`` itself: the SDK raises
    it for its own configuration (credentials), every HTTP failure is a subclass."""
    return any(f"{type(e).__module__}.{type(e).__qualname__}" == "openai.OpenAIError" for e in _chain(exc))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (or contexts), outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _response_headers(exc: BaseException) -> Mapping[str, str]:
    headers: Any = getattr(exc, "litellm_response_headers", None)
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers or {}


def _retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date).

    >>> _retry_after_seconds({"retry-after-ms": "250"})
    0.25
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    if "retry-after-ms" in lowered:
        milliseconds = _as_float(lowered["retry-after-ms"])
        if milliseconds is not None:
            return milliseconds / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _as_float(value)
    if seconds is not None:
        return seconds
    parsed = email.utils.parsedate_tz(value)
    return max(email.utils.mktime_tz(parsed) - time.time(), 0.0) if parsed else None


def _as_float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None
