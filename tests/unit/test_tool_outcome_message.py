"""A tool outcome's result message: its JSON result written as it is (once per outcome's
use, never converted again), the same text the model got before; an error as its text."""

from __future__ import annotations

from typing import Any

import pytest

from helix_dbos._durable.payloads import ToolJob, ToolOutcome, call_digest, tool_checkpoint, tool_outcome
from helix_dbos.orchestration import create_tool_result_message
from helix_dbos.types import ParsedToolCall

RESULTS: list[Any] = [
    {"ok": True, "n": 1, "x": 1.5, "none": None},
    {"nested": {"list": [1, "two", [3.0, {"é": "ü"}]]}, "emoji": "🙂"},
    ["a", 2, None],
    "plain text",
    0,
    None,
    {"big": 10**20, "neg": -0.0, "tiny": 1e-300},
]


@pytest.mark.parametrize("result", RESULTS)
def test_a_success_reads_as_create_tool_result_message_writes_it(result: Any) -> None:
    call = ParsedToolCall(id="c1", name="lookup", arguments={})
    outcome = tool_outcome(call, tool_checkpoint(ToolOutcome(tool_call_id="c1", tool_name="lookup", success=True,
                                                             result=result)))

    assert outcome.message() == create_tool_result_message("c1", "lookup", result=result, success=True)


def test_a_failure_is_its_error() -> None:
    outcome = ToolOutcome(tool_call_id="c1", tool_name="lookup", success=False, error="no such thing")

    message = outcome.message()
    assert message == create_tool_result_message("c1", "lookup", success=False, error="no such thing")
    assert message.is_error and message.content == "no such thing"


def test_a_tool_jobs_key_digests_its_call_once() -> None:
    call = ParsedToolCall(id="c1", name="lookup", arguments={"q": "a"})
    job = ToolJob("agent", "s1", 1, 2, call, {})

    assert job.key == ("s1", 2, "c1", call_digest(call))
    assert job.key is job.key  # the step and the code around it share one digest
