"""helix-dbos: durable AI agent loops as DBOS workflows on Postgres.

    from helix_dbos import define_agent, tool, DBOSAgentExecutor, LiteLLMAdapter

The names below are the public API; the pure functions of the agent loop stay importable
from ``helix_dbos.orchestration`` and ``helix_dbos.state``, and the operator API (with
nothing but a database URL) is ``helix_dbos.admin``. Names are imported on first use, so
that ``import helix_dbos.orchestration`` (the pure core) pulls in neither DBOS nor the
database driver, and the CLI starts fast; type checkers see every name's real type.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

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
    "Toolset": "helix_dbos.toolsets",
    "ToolsetRun": "helix_dbos.toolsets",
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
    "AgentHandle": "helix_dbos._client.handle",
    "DBOSAgentExecutor": "helix_dbos._client.executor",
    "application_version": "helix_dbos._client.launcher",
    "dbos_config": "helix_dbos._client.launcher",
    "launch_standalone": "helix_dbos._client.launcher",
    "shutdown": "helix_dbos._client.launcher",
    "shutdown_async": "helix_dbos._client.launcher",
    "drain": "helix_dbos._client.launcher",
    "Drained": "helix_dbos._client.leases",
    "LeaseSettings": "helix_dbos._client.leases",
    "QueueSettings": "helix_dbos._client.queues",
    "RateLimit": "helix_dbos._client.queues",
    "RunEnqueuer": "helix_dbos._client.queues",
    "register_queue": "helix_dbos._client.queues",
    "StructuredLogger": "helix_dbos._logs",
    # what the executor and the operator API return
    "AnswerRecord": "helix_dbos._store.records",
    "EventRecord": "helix_dbos._store.records",
    "PendingToolCall": "helix_dbos._store.records",
    "RunRecord": "helix_dbos._store.records",
    "SessionRecord": "helix_dbos._store.records",
    "UsageSummary": "helix_dbos._store.records",
    # human in the loop
    "ApprovalResponse": "helix_dbos.answers",
    "ClientToolResult": "helix_dbos.answers",
    "SubmitOutcome": "helix_dbos.answers",
    # values
    "AgentResult": "helix_dbos.types",
    "AssistantMessage": "helix_dbos.types",
    "Event": "helix_dbos.events",
    "DeltaRecord": "helix_dbos._deltas",
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
    "MemoryInputError": "helix_dbos.errors",
    "EmbeddingError": "helix_dbos.errors",
    "ReadOnlyStateError": "helix_dbos.errors",
    "SchemaOutdatedError": "helix_dbos.errors",
    "SessionBusyError": "helix_dbos.errors",
    "SessionNotFoundError": "helix_dbos.errors",
    "ToolCallLostError": "helix_dbos.errors",
    "ToolCallNotPendingError": "helix_dbos.errors",
    "ToolInputError": "helix_dbos.errors",
    "UnstorableTextError": "helix_dbos.errors",
    "VectorSearchUnavailableError": "helix_dbos.errors",
    "WorkflowContextError": "helix_dbos.errors",
}

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from helix_dbos.agents import AgentConfig as AgentConfig, AgentHooks as AgentHooks, define_agent as define_agent
    from helix_dbos.answers import (
        ApprovalResponse as ApprovalResponse,
        ClientToolResult as ClientToolResult,
        SubmitOutcome as SubmitOutcome,
    )
    from helix_dbos._client.executor import DBOSAgentExecutor as DBOSAgentExecutor
    from helix_dbos._client.handle import AgentHandle as AgentHandle
    from helix_dbos._client.launcher import (
        application_version as application_version,
        dbos_config as dbos_config,
        drain as drain,
        launch_standalone as launch_standalone,
        shutdown as shutdown,
        shutdown_async as shutdown_async,
    )
    from helix_dbos._client.leases import Drained as Drained, LeaseSettings as LeaseSettings
    from helix_dbos._client.queues import (
        QueueSettings as QueueSettings,
        RateLimit as RateLimit,
        RunEnqueuer as RunEnqueuer,
        register_queue as register_queue,
    )
    from helix_dbos.companions import PersistentAgent as PersistentAgent, persistent_agent as persistent_agent
    from helix_dbos._deltas import DeltaRecord as DeltaRecord
    from helix_dbos.errors import (
        AgentDefinitionError as AgentDefinitionError,
        AgentNotRegisteredError as AgentNotRegisteredError,
        ConfigurationError as ConfigurationError,
        DatabaseError as DatabaseError,
        DatabaseUnavailableError as DatabaseUnavailableError,
        ExecutorIdInUseError as ExecutorIdInUseError,
        HelixError as HelixError,
        InvalidLastEventIdError as InvalidLastEventIdError,
        InvalidToolResultError as InvalidToolResultError,
        MemoryInputError as MemoryInputError,
        EmbeddingError as EmbeddingError,
        ReadOnlyStateError as ReadOnlyStateError,
        SchemaOutdatedError as SchemaOutdatedError,
        SessionBusyError as SessionBusyError,
        SessionNotFoundError as SessionNotFoundError,
        ToolCallLostError as ToolCallLostError,
        ToolCallNotPendingError as ToolCallNotPendingError,
        ToolInputError as ToolInputError,
        UnstorableTextError as UnstorableTextError,
        VectorSearchUnavailableError as VectorSearchUnavailableError,
        WorkflowContextError as WorkflowContextError,
    )
    from helix_dbos.events import Event as Event
    from helix_dbos.llm import (
        LLMAdapter as LLMAdapter,
        LiteLLMAdapter as LiteLLMAdapter,
        MockLLMAdapter as MockLLMAdapter,
    )
    from helix_dbos._logs import StructuredLogger as StructuredLogger
    from helix_dbos.orchestration import (
        StopInfo as StopInfo,
        cost_exceeds as cost_exceeds,
        has_tool_call as has_tool_call,
        step_count_is as step_count_is,
        total_tokens_exceed as total_tokens_exceed,
    )
    from helix_dbos.remote import create_remote_sub_agent_tool as create_remote_sub_agent_tool
    from helix_dbos._store.records import (
        AnswerRecord as AnswerRecord,
        EventRecord as EventRecord,
        PendingToolCall as PendingToolCall,
        RunRecord as RunRecord,
        SessionRecord as SessionRecord,
        UsageSummary as UsageSummary,
    )
    from helix_dbos.subagents import create_sub_agent_tool as create_sub_agent_tool
    from helix_dbos.tools import (
        AbortSignal as AbortSignal,
        HookContext as HookContext,
        Tool as Tool,
        ToolContext as ToolContext,
        define_tool as define_tool,
        tool as tool,
    )
    from helix_dbos.toolsets import Toolset as Toolset, ToolsetRun as ToolsetRun
    from helix_dbos.types import (
        AgentResult as AgentResult,
        AssistantMessage as AssistantMessage,
        LLMConfig as LLMConfig,
        Message as Message,
        ParsedToolCall as ParsedToolCall,
        SessionStatus as SessionStatus,
        StepInfo as StepInfo,
        StepResult as StepResult,
        SystemMessage as SystemMessage,
        TextStepResult as TextStepResult,
        ToolCallsStepResult as ToolCallsStepResult,
        ToolResultMessage as ToolResultMessage,
        Usage as Usage,
        UserMessage as UserMessage,
    )
    from helix_dbos import admin as admin

__all__ = sorted([*_EXPORTS, "admin"])


def __getattr__(name: str) -> Any:
    if name == "admin":
        return importlib.import_module("helix_dbos.admin")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'helix_dbos' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
