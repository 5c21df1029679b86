"""Stop conditions: StopInfo predicates, factories and compile_stop_conditions."""

import asyncio

from helix_dbos.orchestration import (
    StopCondition,
    StopInfo,
    compile_stop_conditions,
    cost_exceeds,
    has_tool_call,
    step_count_is,
    total_tokens_exceed,
)
from helix_dbos.types import (
    ParsedSubAgentCall,
    ParsedToolCall,
    TextStepResult,
    ToolCallsStepResult,
    Usage,
)


def tool_step(*names: str) -> ToolCallsStepResult:
    return ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=f"c{i}", name=name) for i, name in enumerate(names)]
    )


def info(steps=(), step_count=None, usage=None) -> StopInfo:
    steps = list(steps)
    return StopInfo(
        steps=steps,
        step_count=len(steps) if step_count is None else step_count,
        usage=usage or Usage(),
    )


def check(condition, stop_info) -> bool:
    return asyncio.run(compile_stop_conditions(10_000, condition)(stop_info))


# --- the seed's inline predicates and their factories --------------------------------


def after_finalize(i: StopInfo) -> bool:
    """Stop once a step has called the `finalize` tool."""
    last = i.steps[-1] if i.steps else None
    return isinstance(last, ToolCallsStepResult) and any(
        c.name == "finalize" for c in last.tool_calls
    )


def after_three_steps(i: StopInfo) -> bool:
    """Stop once we have run at least 3 steps."""
    return i.step_count >= 3


def test_seed_inline_predicates_match_factories():
    histories = [
        [tool_step("search")],
        [tool_step("search"), tool_step("finalize")],
        [tool_step("finalize"), tool_step("search")],
        [tool_step("a"), tool_step("b"), tool_step("c")],
        [TextStepResult(content="x")],
    ]
    for steps in histories:
        i = info(steps)
        assert has_tool_call("finalize")(i) == after_finalize(i)
        assert step_count_is(3)(i) == after_three_steps(i)


def test_seed_stop_when_list_is_or_ed_with_max_steps():
    should_stop = compile_stop_conditions(10, [after_finalize, after_three_steps])

    assert asyncio.run(should_stop(info([tool_step("search")]))) is False
    assert asyncio.run(should_stop(info([tool_step("search"), tool_step("finalize")]))) is True
    assert asyncio.run(should_stop(info([tool_step("a")] * 3))) is True
    assert asyncio.run(should_stop(info([tool_step("a")], step_count=10))) is True


def test_stop_when_never_extends_the_step_budget():
    never: StopCondition = lambda i: False  # noqa: E731
    should_stop = compile_stop_conditions(2, never)

    assert asyncio.run(should_stop(info(step_count=1))) is False
    assert asyncio.run(should_stop(info(step_count=2))) is True


def test_a_single_condition_and_none_are_accepted():
    assert asyncio.run(compile_stop_conditions(5, None)(info(step_count=5))) is True
    assert asyncio.run(compile_stop_conditions(5, None)(info(step_count=4))) is False
    assert asyncio.run(compile_stop_conditions(5, step_count_is(2))(info(step_count=2))) is True


def test_async_conditions_are_awaited():
    async def slow_yes(i: StopInfo) -> bool:
        await asyncio.sleep(0)
        return i.step_count == 2

    assert check([slow_yes], info(step_count=2)) is True
    assert check([slow_yes], info(step_count=1)) is False


def test_conditions_are_evaluated_in_order_and_short_circuit():
    calls = []

    def record(name, verdict):
        def condition(i):
            calls.append(name)
            return verdict

        return condition

    assert check([record("a", False), record("b", True), record("c", True)], info()) is True
    assert calls == ["a", "b"]


# --- factories ---------------------------------------------------------------------


def test_has_tool_call_looks_at_the_latest_step_only():
    assert has_tool_call("search")(info([tool_step("search")])) is True
    assert has_tool_call("search")(info([tool_step("search"), tool_step("fetch")])) is False
    assert has_tool_call("search")(info([])) is False
    assert has_tool_call("search")(info([TextStepResult(content="search")])) is False


def test_has_tool_call_sees_sub_agent_calls_by_stored_name():
    step = ToolCallsStepResult(
        sub_agent_calls=[ParsedSubAgentCall(id="s", agent_type="summarizer")]
    )

    assert has_tool_call("subagent__summarizer")(info([step])) is True


def test_total_tokens_exceed_is_strict():
    condition = total_tokens_exceed(100)

    assert condition(info(usage=Usage(total_tokens=100))) is False
    assert condition(info(usage=Usage(total_tokens=101))) is True


def test_cost_exceeds_is_strict_and_ignores_unknown_cost():
    condition = cost_exceeds(0.5)

    assert condition(info(usage=Usage(cost_usd=None, total_tokens=10**9))) is False
    assert condition(info(usage=Usage(cost_usd=0.5))) is False
    assert condition(info(usage=Usage(cost_usd=0.51))) is True


def test_step_count_is_fires_at_and_after_the_count():
    condition = step_count_is(3)

    assert [condition(info(step_count=n)) for n in (2, 3, 4)] == [False, True, True]
