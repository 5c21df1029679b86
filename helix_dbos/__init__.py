"""helix-dbos: durable AI agent loops as DBOS workflows on Postgres.

    from helix_dbos import define_agent, tool, DBOSAgentExecutor, LiteLLMAdapter

The names below are the public API. They are imported on first use, so that
``import helix_dbos.orchestration`` (the pure core) pulls in neither DBOS nor the
database driver, and the CLI starts fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "AgentConfig": "helix_dbos.agents",
    "AgentDefinitionError": "helix_dbos.tools",
    "AgentHandle": "helix_dbos.runtime.handle",
    "AgentHooks": "helix_dbos.agents",
    "AgentNotRegisteredError": "helix_dbos.errors",
    "AgentResult": "helix_dbos.types",
    "AssistantMessage": "helix_dbos.types",
    "DBOSAgentExecutor": "helix_dbos.runtime.executor",
    "DatabaseError": "helix_dbos.errors",
    "HelixError": "helix_dbos.errors",
    "LLMAdapter": "helix_dbos.llm",
    "LLMConfig": "helix_dbos.types",
    "LiteLLMAdapter": "helix_dbos.llm",
    "Message": "helix_dbos.types",
    "MockLLMAdapter": "helix_dbos.llm",
    "ParsedSubAgentCall": "helix_dbos.types",
    "ParsedToolCall": "helix_dbos.types",
    "SessionBusyError": "helix_dbos.errors",
    "SessionNotFoundError": "helix_dbos.errors",
    "StateTracker": "helix_dbos.state",
    "StepResult": "helix_dbos.types",
    "SystemMessage": "helix_dbos.types",
    "TextStepResult": "helix_dbos.types",
    "Tool": "helix_dbos.tools",
    "ToolCallNotPendingError": "helix_dbos.errors",
    "ToolCallsStepResult": "helix_dbos.types",
    "ToolContext": "helix_dbos.tools",
    "ToolInputError": "helix_dbos.tools",
    "ToolResultMessage": "helix_dbos.types",
    "Usage": "helix_dbos.types",
    "UserMessage": "helix_dbos.types",
    "apply_step_writes": "helix_dbos.state",
    "build_messages_for_llm": "helix_dbos.orchestration",
    "create_sub_agent_tool": "helix_dbos.runtime.subagents",
    "ApprovalResponse": "helix_dbos.runtime.hitl",
    "ClientToolResult": "helix_dbos.runtime.hitl",
    "SubmitOutcome": "helix_dbos.runtime.hitl",
    "InvalidToolResultError": "helix_dbos.runtime.hitl",
    "cost_exceeds": "helix_dbos.orchestration",
    "create_assistant_message": "helix_dbos.orchestration",
    "create_sub_agent_result_message": "helix_dbos.orchestration",
    "create_tool_result_message": "helix_dbos.orchestration",
    "define_agent": "helix_dbos.agents",
    "define_tool": "helix_dbos.tools",
    "determine_final_status": "helix_dbos.orchestration",
    "find_unpaired_finish_call_id": "helix_dbos.orchestration",
    "has_tool_call": "helix_dbos.orchestration",
    "is_recoverable_error_stop_reason": "helix_dbos.orchestration",
    "launch_standalone": "helix_dbos.runtime.launch",
    "merge_step_writes": "helix_dbos.state",
    "plan_step_processing": "helix_dbos.orchestration",
    "should_stop_execution": "helix_dbos.orchestration",
    "shutdown": "helix_dbos.runtime.launch",
    "step_count_is": "helix_dbos.orchestration",
    "step_writes_to_rfc6902": "helix_dbos.state",
    "synthesize_finish_tool_result": "helix_dbos.orchestration",
    "tool": "helix_dbos.tools",
    "total_tokens_exceed": "helix_dbos.orchestration",
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
