"""helix-dbos: durable AI agent loops as DBOS workflows on Postgres.

    from helix_dbos import define_agent, tool, DBOSAgentExecutor, LiteLLMAdapter

The names below are the public API; the seed's pure functions stay importable from
``helix_dbos.orchestration`` and ``helix_dbos.state``, the operator API is
``helix_dbos.client.admin``. Names are imported on first use, so that ``import
helix_dbos.orchestration`` (the pure core) pulls in neither DBOS nor the database driver,
and the CLI starts fast.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

__version__ = "0.1.0"
"""This release; see CHANGELOG.md for what each release changed and docs/upgrading.md for
what is compatible between them."""

logging.getLogger("helix_dbos").addHandler(logging.NullHandler())  # silent unless the app configures logging

_EXPORTS: dict[str, str] = {
    # defining agents and tools
    "AgentConfig": "helix_dbos.agents",
    "AgentHooks": "helix_dbos.agents",
    "AbortSignal": "helix_dbos.tools",
    "HookContext": "helix_dbos.tools",
    "Tool": "helix_dbos.tools",
    "ToolContext": "helix_dbos.tools",
    "create_sub_agent_tool": "helix_dbos.subagents",
    "create_remote_sub_agent_tool": "helix_dbos.remote",
    "persistent_agent": "helix_dbos.companions",
    "PersistentAgent": "helix_dbos.companions",
    "define_agent": "helix_dbos.agents",
    "define_tool": "helix_dbos.tools",
    "tool": "helix_dbos.tools",
    "cost_exceeds": "helix_dbos.orchestration",
    "has_tool_call": "helix_dbos.orchestration",
    "step_count_is": "helix_dbos.orchestration",
    "total_tokens_exceed": "helix_dbos.orchestration",
    "StopInfo": "helix_dbos.orchestration",
    # models
    "LLMAdapter": "helix_dbos.llm",
    "LLMConfig": "helix_dbos.types",
    "LiteLLMAdapter": "helix_dbos.llm",
    "MockLLMAdapter": "helix_dbos.llm",
    # running agents
    "AgentHandle": "helix_dbos.client.handle",
    "DBOSAgentExecutor": "helix_dbos.client.executor",
    "application_version": "helix_dbos.client.launcher",
    "dbos_config": "helix_dbos.client.launcher",
    "launch_standalone": "helix_dbos.client.launcher",
    "shutdown": "helix_dbos.client.launcher",
    "drain": "helix_dbos.client.launcher",
    "Drained": "helix_dbos.client.leases",
    "LeaseSettings": "helix_dbos.client.leases",
    "QueueSettings": "helix_dbos.client.queues",
    "RateLimit": "helix_dbos.client.queues",
    "RunEnqueuer": "helix_dbos.client.queues",
    "register_queue": "helix_dbos.client.queues",
    "StructuredLogger": "helix_dbos.logs",
    # human in the loop
    "ApprovalResponse": "helix_dbos.answers",
    "ClientToolResult": "helix_dbos.answers",
    "SubmitOutcome": "helix_dbos.answers",
    # values
    "AgentResult": "helix_dbos.types",
    "AssistantMessage": "helix_dbos.types",
    "Event": "helix_dbos.events",
    "DeltaRecord": "helix_dbos.deltas",
    "Message": "helix_dbos.types",
    "ParsedToolCall": "helix_dbos.types",
    "SessionStatus": "helix_dbos.types",
    "StepInfo": "helix_dbos.types",
    "StepResult": "helix_dbos.types",
    "SystemMessage": "helix_dbos.types",
    "TextStepResult": "helix_dbos.types",
    "ToolCallsStepResult": "helix_dbos.types",
    "ToolResultMessage": "helix_dbos.types",
    "Usage": "helix_dbos.types",
    "UserMessage": "helix_dbos.types",
    # errors
    "AgentDefinitionError": "helix_dbos.errors",
    "AgentNotRegisteredError": "helix_dbos.errors",
    "ConfigurationError": "helix_dbos.errors",
    "ExecutorIdInUseError": "helix_dbos.errors",
    "DatabaseError": "helix_dbos.errors",
    "DatabaseUnavailableError": "helix_dbos.errors",
    "HelixError": "helix_dbos.errors",
    "InvalidLastEventIdError": "helix_dbos.errors",
    "InvalidToolResultError": "helix_dbos.errors",
    "ReadOnlyStateError": "helix_dbos.errors",
    "SchemaOutdatedError": "helix_dbos.errors",
    "SessionBusyError": "helix_dbos.errors",
    "SessionNotFoundError": "helix_dbos.errors",
    "ToolCallNotPendingError": "helix_dbos.errors",
    "ToolInputError": "helix_dbos.errors",
    "UnstorableTextError": "helix_dbos.errors",
    "WorkflowContextError": "helix_dbos.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'helix_dbos' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
