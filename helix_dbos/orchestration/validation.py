"""Validation helpers shared by the step planner, finishWith resolution and tools.

Outputs are validated against a pydantic model class and returned as JSON-able data
(``model_dump(mode="json", by_alias=True)``), so what is stored is exactly what the
schema shown to the model describes::

    >>> from pydantic import BaseModel
    >>> class Out(BaseModel):
    ...     result: str
    >>> validate_output({"result": "done"}, Out)
    {'result': 'done'}
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

logger = logging.getLogger("helix_dbos")


def format_validation_error(error: ValidationError) -> str:
    """One line per pydantic error, ``- <location>: <message>``.

    Args:
        error: The pydantic error.

    Returns:
        The lines.

    Examples:
        >>> from pydantic import BaseModel
        >>> class In(BaseModel):
        ...     query: str
        >>> try:
        ...     In.model_validate({})
        ... except ValidationError as e:
        ...     print(format_validation_error(e))
        - query: Field required
    """
    lines = []
    for issue in error.errors(include_url=False):
        location = ".".join(str(part) for part in issue["loc"]) or "(root)"
        lines.append(f"- {location}: {issue['msg']}")
    return "\n".join(lines)


def to_json_value(value: Any) -> Any:
    """``value`` as plain JSON data (pydantic models dumped by alias, dates as ISO strings).

    What JSON cannot hold is refused, so a tool's bad output becomes its error result
    instead of a transcript that is not valid JSON.

    Args:
        value: Any value of JSON data, pydantic models, dates and the like.

    Returns:
        The JSON data.

    Raises:
        ValueError: ``value`` holds what JSON cannot (NaN, Infinity).
    """
    data = to_jsonable_python(value)
    try:
        json.dumps(data, allow_nan=False)
    except ValueError:
        raise ValueError("value is not valid JSON: it contains NaN or Infinity") from None
    return data


def validate_output(value: Any, schema: type[BaseModel]) -> Any:
    """Validate ``value`` against ``schema`` and return it as JSON data.

    Args:
        value: The output.
        schema: The pydantic model it must conform to.

    Returns:
        The validated output as JSON data.

    Raises:
        pydantic.ValidationError: ``value`` does not conform.
    """
    return to_json_value(schema.model_validate(value))


def conform_output(value: Any, schema: type[BaseModel] | None, *, source: str) -> Any:
    """Best-effort validation for outputs that cannot be sent back to the model.

    A native structured output or a finishWith tool's (transformed) output that fails
    ``schema`` is passed through unchanged with a loud warning listing the issues,
    instead of being silently accepted.

    Args:
        value: The output.
        schema: The agent's output schema, or None.
        source: What produced it, named in the warning.

    Returns:
        The validated output as JSON data, or ``value`` unchanged when it does not conform.
    """
    json_value = to_json_value(value)
    if schema is None:
        return json_value
    try:
        return validate_output(json_value, schema)
    except ValidationError as error:
        logger.warning(
            "%s output does not match the output schema %s; passing it through unvalidated:\n%s",
            source,
            schema.__name__,
            format_validation_error(error),
        )
        return json_value
