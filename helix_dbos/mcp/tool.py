"""A tool of an MCP server as a helix :class:`~helix_dbos.tools.Tool`: the model sees
the server's JSON Schema for it, and the arguments are validated against that schema
(``jsonschema``) before the call goes to the server, so a bad call is an error result
the model can correct, as for any helix tool::

    tool = MCPTool(name="files_read", description="Read a file.", input_schema=MCPArguments,
                   execute=call, json_schema={"type": "object", ...}, server="files", remote_name="read")
    tool.parse_input({"path": "a.txt"}).root     # {'path': 'a.txt'}

``execute`` receives the arguments as an :class:`MCPArguments` (their dict is ``.root``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from pydantic import RootModel

from helix_dbos.errors import ToolInputError
from helix_dbos.tools import Tool

_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9_-]")


class MCPArguments(RootModel[dict[str, Any]]):
    """The arguments of an MCP tool call, validated against the tool's JSON Schema."""


@dataclass(frozen=True, eq=False)
class MCPTool(Tool):
    """A tool an MCP server listed (see the module)."""

    json_schema: dict[str, Any] = field(default_factory=dict)
    """The input schema the server listed."""
    server: str = ""
    """The toolset's name (``MCPToolset.name``)."""
    remote_name: str = ""
    """The tool's name on the server."""

    @functools.cached_property
    def _input_json_schema(self) -> dict[str, Any]:
        return self.json_schema

    @functools.cached_property
    def _validator(self) -> jsonschema.protocols.Validator:
        schema = self.json_schema
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return validator_class(schema)

    def parse_input(self, arguments: Any) -> MCPArguments:
        """The arguments, when they are an object valid for the tool's schema (``None``
        counts as ``{}``).

        Args:
            arguments: The model's arguments.

        Returns:
            The arguments.

        Raises:
            ToolInputError: The arguments are not an object valid for the tool's schema.
        """
        value = {} if arguments is None else arguments
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if not isinstance(value, dict) and not errors:
            errors = [jsonschema.ValidationError(f"{value!r} is not an object")]
        if errors:
            problems = "\n".join(f"- {_where(error)}: {error.message}" for error in errors)
            raise ToolInputError(f"Invalid arguments for tool '{self.name}':\n{problems}", self.name, errors[0])
        return MCPArguments(value)


def helix_name(remote_name: str, prefix: str | None) -> str:
    """The name the model calls a server's tool by: ``<prefix>_<name>`` (with a prefix),
    characters a provider refuses replaced by ``_``, at most 64 characters."""
    name = f"{prefix}_{remote_name}" if prefix else remote_name
    return _NOT_IN_NAMES.sub("_", name)[:64] or "_"


def is_valid_schema(schema: Any) -> bool:
    """Whether ``schema`` is a JSON Schema (of its declared draft) for an object."""
    if not isinstance(schema, dict):
        return False
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return bool(schema.get("type", "object") == "object")


def _where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(arguments)"
