"""define_agent: __finish__ injection, finishWith exclusivity, prompts, state, checks, hooks."""

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field, RootModel

from helix_dbos.agents import AgentConfig, AgentHooks, define_agent
from helix_dbos.orchestration import StopInfo, has_tool_call
from helix_dbos.tools import AgentDefinitionError, Tool, define_tool
from helix_dbos.types import LLMConfig, ParsedToolCall, ToolCallsStepResult


class Query(BaseModel):
    query: str


class AnswerInput(BaseModel):
    answer: str
    verified: bool


class OutputSchema(BaseModel):
    analysis: str
    confidence: float
    savedId: str | None = None


class Sentiment(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    confidence: float


search_tool = define_tool(
    "search", "Search for information", Query, execute=lambda input, ctx: {"results": []}
)
submit_answer_tool = define_tool(
    "submit_answer",
    "Submit the final answer after verification",
    AnswerInput,
    execute=lambda input, ctx: {"result": input.answer, "submittedAt": "now"},
    finish_with=True,
)
approve_tool = define_tool(
    "approve_with_comments",
    "Approve",
    Query,
    execute=lambda input, ctx: {"status": "approved"},
    finish_with=True,
)
reject_tool = define_tool(
    "reject", "Reject", Query, execute=lambda input, ctx: {"status": "rejected"}, finish_with=True
)

FINISH_SECTION = (
    "## Output Requirement\n"
    "This task requires structured output. You MUST complete your work by calling\n"
    "the `{}` tool. This tool will process your output and complete the task.\n"
    "DO NOT use any other method to return your final answer."
)


# --- __finish__ injection --------------------------------------------------------------


def test_seed_output_schema_injects_finish_tool():
    analyzer = define_agent(
        name="analyzer",
        system_prompt="Analyze the input and return results",
        llm_config={"model": "openai/gpt-4o"},
        output_schema=Sentiment,
    )

    specs = analyzer.tool_specs()
    assert [spec.name for spec in specs] == ["__finish__"]
    assert specs[0].parameters == Sentiment.model_json_schema()
    assert specs[0].strict is False
    finish = analyzer.get_tool("__finish__")
    assert finish is analyzer.finish_tool
    assert finish.is_finish and finish.input_schema is Sentiment
    assert analyzer.finish_tool_name == "__finish__"


def test_seed_strict_output_opts_finish_into_strict_mode():
    researcher = define_agent(
        "researcher",
        "...",
        output_schema=OutputSchema,
        llm_config=LLMConfig(model="anthropic/claude-sonnet-4-5", strict_output=True),
    )

    assert researcher.tool_specs()[-1].strict is True


def test_seed_agent_with_finish_with_tool_gets_no_finish():
    agent = define_agent("submission-agent", tools=[submit_answer_tool], output_schema=OutputSchema)

    assert [spec.name for spec in agent.tool_specs()] == ["submit_answer"]
    assert agent.finish_tool is None
    assert agent.get_tool("__finish__") is None
    assert agent.finish_tool_name == "submit_answer"


def test_seed_agent_without_finish_with_tool_gets_finish_last():
    agent = define_agent("simple-agent", tools=[search_tool], output_schema=OutputSchema)

    assert [tool.name for tool in agent.all_tools()] == ["search", "__finish__"]


def test_no_output_schema_no_finish_tool():
    agent = define_agent("chat", "Chat.", tools=[search_tool])

    assert [spec.name for spec in agent.tool_specs()] == ["search"]
    assert agent.finish_tool_name is None


def test_seed_multiple_finish_with_tools_first_names_the_prompt():
    reviewer = define_agent(
        "reviewer", tools=[approve_tool, reject_tool], output_schema=OutputSchema
    )

    assert reviewer.finish_tool_name == "approve_with_comments"
    assert [t.name for t in reviewer.finish_with_tools] == ["approve_with_comments", "reject"]


def test_get_tool_by_name():
    agent = define_agent("a", tools=[search_tool])

    assert agent.get_tool("search") is search_tool
    assert agent.get_tool("missing") is None


# --- system prompt -----------------------------------------------------------------


def test_seed_system_prompt_with_finish():
    agent = define_agent("analyzer", "Analyze the text", output_schema=Sentiment)

    assert agent.system_prompt_for({}) == "Analyze the text\n\n" + FINISH_SECTION.format(
        "__finish__"
    )


def test_seed_system_prompt_with_finish_with_tool():
    agent = define_agent(
        "a", "Answer.", tools=[search_tool, submit_answer_tool], output_schema=OutputSchema
    )

    assert agent.system_prompt_for({}) == "Answer.\n\n" + FINISH_SECTION.format("submit_answer")


def test_finish_with_tool_without_output_schema_still_gets_the_section():
    agent = define_agent("a", "Answer.", tools=[submit_answer_tool])

    assert agent.system_prompt_for({}).endswith(FINISH_SECTION.format("submit_answer"))


def test_plain_agent_prompt_is_untouched_and_dynamic_prompts_see_state():
    agent = define_agent("a", lambda state: f"You have {len(state['notes'])} notes.")

    assert agent.system_prompt_for({"notes": [1, 2]}) == "You have 2 notes."


# --- state ---------------------------------------------------------------------------


class AnalysisState(BaseModel):
    lastSavedId: str | None = None
    notes: list[str] = Field(default_factory=list)


def test_seed_initial_state_from_state_schema_defaults():
    agent = define_agent("analysis-agent", state_schema=AnalysisState)

    assert agent.initial_state() == {"lastSavedId": None, "notes": []}


def test_initial_state_without_schema_is_empty_and_fresh():
    agent = define_agent("a")
    first = agent.initial_state()
    first["x"] = 1

    assert agent.initial_state() == {}


# --- llm_config ------------------------------------------------------------------------


def test_llm_config_forms():
    assert define_agent("a", llm_config="openai/gpt-4o").llm_config == LLMConfig(
        model="openai/gpt-4o"
    )
    assert define_agent("a", llm_config={"model": "m", "temperature": 0.7}).llm_config == LLMConfig(
        model="m", temperature=0.7
    )
    config = LLMConfig(model="x")
    assert define_agent("a", llm_config=config).llm_config is config
    assert define_agent("a").llm_config == LLMConfig()


def test_invalid_llm_config_dict():
    with pytest.raises(AgentDefinitionError, match="Invalid llm_config"):
        define_agent("a", llm_config={"modle": "typo"})


# --- stop conditions --------------------------------------------------------------------


def stop_info(*names: str, step_count: int = 1) -> StopInfo:
    step = ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id=f"c{i}", name=n) for i, n in enumerate(names)]
    )
    return StopInfo(steps=[step], step_count=step_count)


def test_should_stop_ors_max_steps_with_stop_when():
    agent = define_agent("a", tools=[search_tool], max_steps=3, stop_when=has_tool_call("finalize"))

    assert len(agent.stop_when) == 1
    assert asyncio.run(agent.should_stop(stop_info("search"))) is False
    assert asyncio.run(agent.should_stop(stop_info("finalize"))) is True
    assert asyncio.run(agent.should_stop(stop_info("search", step_count=3))) is True


def test_should_stop_with_a_list_of_async_conditions():
    async def never(info):
        return False

    async def at_two(info):
        return info.step_count == 2

    agent = define_agent("a", stop_when=[never, at_two])

    assert asyncio.run(agent.should_stop(stop_info(step_count=2))) is True
    assert asyncio.run(agent.should_stop(stop_info(step_count=1))) is False


def test_defaults():
    agent = define_agent("a")

    assert isinstance(agent, AgentConfig)
    assert (agent.max_steps, agent.max_tool_concurrency, agent.stop_when, agent.tools) == (
        10,
        5,
        (),
        (),
    )
    assert agent.hooks == AgentHooks()


# --- hooks ------------------------------------------------------------------------------


def test_hooks_fire_sync_and_async_and_skip_missing():
    calls = []

    async def on_message(message, ctx):
        await asyncio.sleep(0)
        calls.append(("on_message", message))

    hooks = AgentHooks(
        before_tool=lambda call, ctx: calls.append(("before_tool", call.id)), on_message=on_message
    )
    agent = define_agent("a", hooks=hooks)

    async def fire_all():
        await agent.hooks.fire("before_tool", ParsedToolCall(id="t1", name="search"), None)
        await agent.hooks.fire("on_message", "msg", None)
        await agent.hooks.fire("after_tool", None, None, None)

    asyncio.run(fire_all())
    assert calls == [("before_tool", "t1"), ("on_message", "msg")]


def test_hook_errors_propagate():
    def broken(result, ctx):
        raise RuntimeError("hook failed")

    hooks = AgentHooks(on_agent_complete=broken)

    with pytest.raises(RuntimeError, match="hook failed"):
        asyncio.run(hooks.fire("on_agent_complete", None, None))


def test_non_callable_hook_is_rejected():
    with pytest.raises(AgentDefinitionError, match="Hook 'on_step_finish' must be callable"):
        AgentHooks(on_step_finish="print")


# --- definition-time errors -------------------------------------------------------------


class ChildInput(BaseModel):
    task: str


def sub_agent_tool(name: str) -> Tool:
    return Tool(
        name=name, description="Delegate", input_schema=ChildInput, execute=None, sub_agent=object()
    )


def test_sub_agent_prefix_is_reserved_unless_flagged():
    impostor = define_tool("subagent__helper", "d", Query, execute=lambda input, ctx: None)

    with pytest.raises(AgentDefinitionError, match="reserved for sub-agent tools"):
        define_agent("a", tools=[impostor])
    agent = define_agent("a", tools=[sub_agent_tool("subagent__helper")])
    assert agent.get_tool("subagent__helper").is_sub_agent


def plain_function(x: int) -> int:
    return x


class ScoreList(RootModel[list[int]]):
    pass


class NeedsValue(BaseModel):
    required: int


class UnstorableDefault(BaseModel):
    notes: dict[str, list[str]] = {"ok": ["fine", "nul\x00here"]}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "bad name"}, "name must be 1-64 characters"),
        ({"name": "x" * 65}, "name must be 1-64 characters"),
        ({"tools": [search_tool, search_tool]}, "duplicate tool name 'search'"),
        (
            {"tools": [define_tool("__finish__", "d", Query, execute=lambda input, ctx: None)]},
            "'__finish__' is reserved",
        ),
        ({"tools": [plain_function]}, "is not a Tool"),
        ({"output_schema": dict}, "output_schema must be a pydantic model class"),
        ({"output_schema": ScoreList}, "not a RootModel"),
        ({"state_schema": NeedsValue}, "every field of state_schema needs a default"),
        ({"state_schema": {"a": 1}}, "state_schema must be a pydantic model class"),
        ({"state_schema": UnstorableDefault}, r"initial state .*state\.notes\.ok\[1\] has NUL \(U\+0000\) at position 3"),
        ({"max_steps": 0}, "max_steps must be an integer >= 1"),
        ({"max_tool_concurrency": 0}, "max_tool_concurrency must be an integer >= 1"),
        ({"max_worker_losses": 0}, "max_worker_losses must be an integer >= 1"),
        ({"max_worker_losses": None}, "max_worker_losses must be an integer >= 1"),
        ({"max_worker_losses": True}, "max_worker_losses must be an integer >= 1"),
        ({"stop_when": [3]}, "stop_when must be a stop condition"),
        ({"hooks": {"on_message": print}}, "hooks must be an AgentHooks"),
        ({"system_prompt": 42}, "system_prompt must be a string or a function"),
    ],
)
def test_invalid_agent_definitions(kwargs, match):
    arguments = {"name": "agent", **kwargs}

    with pytest.raises(AgentDefinitionError, match=match):
        define_agent(**arguments)


def test_an_agents_tool_specs_are_made_once_and_tools_found_by_name() -> None:
    """Every model call of an agent is told the same specs, made once (not per call)."""
    agent = define_agent(name="spec-once", system_prompt="x", tools=[search_tool], output_schema=Sentiment)

    first, second = agent.tool_specs(), agent.tool_specs()
    assert first == second and all(a is b for a, b in zip(first, second))
    assert first is not second  # the list is the caller's own
    assert agent.get_tool("search") is search_tool and agent.get_tool("__finish__") is agent.finish_tool
    assert agent.get_tool("nothing") is None
