"""resolve_finish_with: first successful finishWith wins; transform raising fails the agent;
execute raising leaves the agent running."""

import logging

from pydantic import BaseModel

from helix_dbos.orchestration import FinishWithResolution, ToolCallOutcome, resolve_finish_with


class Output(BaseModel):
    result: str
    score: int = 1


def test_no_finish_with_calls_continue():
    outcomes = [ToolCallOutcome("t1", "search", output={"hits": 3})]

    assert resolve_finish_with(outcomes) == FinishWithResolution(status="continue")
    assert resolve_finish_with([]) == FinishWithResolution(status="continue")


def test_successful_finish_with_completes_with_its_output():
    outcomes = [
        ToolCallOutcome("t1", "search", output={"hits": 3}),
        ToolCallOutcome("t2", "submit", finish_with=True, output={"result": "x"}),
    ]

    assert resolve_finish_with(outcomes) == FinishWithResolution(
        status="completed", output={"result": "x"}, tool_call_id="t2", tool_name="submit"
    )


def test_first_successful_by_call_order_wins():
    outcomes = [
        ToolCallOutcome(
            "a", "approve_with_comments", finish_with=True, output={"status": "approved"}
        ),
        ToolCallOutcome("r", "reject", finish_with=True, output={"status": "rejected"}),
    ]

    resolution = resolve_finish_with(outcomes)
    assert (resolution.tool_name, resolution.output) == (
        "approve_with_comments",
        {"status": "approved"},
    )


def test_a_failed_finish_with_call_is_passed_over():
    outcomes = [
        ToolCallOutcome("a", "approve", finish_with=True, error="Data too short."),
        ToolCallOutcome("r", "reject", finish_with=True, output={"status": "rejected"}),
    ]

    assert resolve_finish_with(outcomes).tool_call_id == "r"


def test_execute_raising_does_not_complete():
    outcomes = [ToolCallOutcome("s", "submit", finish_with=True, error="Data too short.")]

    assert resolve_finish_with(outcomes).status == "continue"


def test_transform_maps_the_output():
    outcome = ToolCallOutcome(
        "p",
        "process_data",
        finish_with=True,
        output={"raw": "hello", "multiplier": 5},
        transform=lambda out: {"result": out["raw"].upper(), "score": out["multiplier"]},
    )

    assert resolve_finish_with([outcome]).output == {"result": "HELLO", "score": 5}


def test_transform_raising_fails_the_agent(caplog):
    caplog.set_level(logging.ERROR, logger="helix_dbos")

    def transform(out):
        raise ValueError("Invalid output")

    resolution = resolve_finish_with(
        [ToolCallOutcome("s", "submit", finish_with=True, output={}, transform=transform)]
    )

    assert resolution.status == "failed"
    assert resolution.output is None
    assert "Invalid output" in resolution.error
    assert "submit" in resolution.error
    assert resolution.tool_call_id == "s"
    assert any("Invalid output" in r.getMessage() for r in caplog.records)


def test_transform_returning_non_json_fails_the_agent():
    resolution = resolve_finish_with(
        [
            ToolCallOutcome(
                "s", "submit", finish_with=True, output={}, transform=lambda out: object()
            )
        ]
    )

    assert resolution.status == "failed"


def test_output_is_validated_against_agent_schema():
    outcome = ToolCallOutcome("s", "submit", finish_with=True, output={"result": "x"})

    assert resolve_finish_with([outcome], Output).output == {"result": "x", "score": 1}


def test_nonconforming_output_passes_through_with_warning(caplog):
    caplog.set_level(logging.WARNING, logger="helix_dbos")
    outcome = ToolCallOutcome("s", "submit", finish_with=True, output={"other": 1})
    resolution = resolve_finish_with([outcome], Output)

    assert resolution.status == "completed"
    assert resolution.output == {"other": 1}
    assert any("result: Field required" in r.getMessage() for r in caplog.records)


def test_resolution_round_trips_json():
    resolution = FinishWithResolution(
        status="completed", output={"a": [1]}, tool_call_id="t", tool_name="n"
    )

    assert FinishWithResolution.model_validate_json(resolution.model_dump_json()) == resolution
