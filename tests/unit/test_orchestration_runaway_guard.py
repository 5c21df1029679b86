"""RunawayGuard: the same tool failing on 3 consecutive steps hard-stops the loop."""

from helix_dbos.orchestration import MAX_SAME_TOOL_ERRORS, RunawayGuard, create_tool_result_message


def ok(name: str):
    return create_tool_result_message(f"{name}-ok", name, {"ok": True})


def err(name: str):
    return create_tool_result_message(f"{name}-err", name, success=False, error="boom")


def test_limit_is_three():
    assert MAX_SAME_TOOL_ERRORS == 3
    assert RunawayGuard().max_same_tool_errors == 3


def test_three_consecutive_failing_steps_trip():
    guard = RunawayGuard()

    assert guard.record_step([err("fetch")]) is None
    assert guard.record_step([err("fetch")]) is None
    assert guard.record_step([err("fetch")]) == "fetch"


def test_a_success_resets_that_tools_counter():
    guard = RunawayGuard()
    guard.record_step([err("fetch")])
    guard.record_step([err("fetch")])
    guard.record_step([ok("fetch")])

    assert guard.record_step([err("fetch")]) is None
    assert guard.record_step([err("fetch")]) is None
    assert guard.record_step([err("fetch")]) == "fetch"


def test_success_in_the_same_step_wins_over_a_failure():
    guard = RunawayGuard(error_counts={"fetch": 2})

    assert guard.record_step([err("fetch"), ok("fetch")]) is None
    assert guard.error_counts == {}


def test_counts_are_per_tool_and_per_step():
    guard = RunawayGuard()
    # several failing calls in one step count once
    assert guard.record_step([err("fetch"), err("fetch"), err("fetch")]) is None
    assert guard.error_counts == {"fetch": 1}
    # another tool's success does not reset fetch
    assert guard.record_step([err("fetch"), ok("search")]) is None
    assert guard.record_step([err("fetch"), err("search")]) == "fetch"
    assert guard.error_counts == {"fetch": 3, "search": 1}


def test_a_step_without_the_tool_does_not_reset_it():
    guard = RunawayGuard()
    guard.record_step([err("fetch")])
    guard.record_step([ok("search")])
    guard.record_step([err("fetch")])

    assert guard.record_step([err("fetch")]) == "fetch"


def test_guard_round_trips_json_mid_run():
    guard = RunawayGuard()
    guard.record_step([err("fetch")])
    guard.record_step([err("fetch")])
    restored = RunawayGuard.model_validate_json(guard.model_dump_json())

    assert restored == guard
    assert restored.record_step([err("fetch")]) == "fetch"
