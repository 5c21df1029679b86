"""Tools: define_tool, @tool schema derivation, ToolContext, and the runtime-facing methods."""

import asyncio
import copy
import inspect
import logging
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from helix_dbos.orchestration import resolve_finish_with
from helix_dbos.tools import (
    AgentDefinitionError,
    HookContext,
    Tool,
    ToolContext,
    ToolEvent,
    ToolInputError,
    define_tool,
    tool,
)
from helix_dbos.types import ToolSpec


class FakeTracker:
    """Stands in for helix_dbos.state.StateTracker: a dict mutated through a draft."""

    def __init__(self, state: dict | None = None) -> None:
        self.state = state or {}
        self.updates = 0

    def get_state(self) -> dict:
        return self.state

    def update(self, fn):
        draft = copy.deepcopy(self.state)
        fn(draft)
        self.state = draft
        self.updates += 1


def make_ctx(tracker: FakeTracker | None = None, emit=None) -> ToolContext:
    return ToolContext("sess-1", "call-1", "agent", 2, tracker or FakeTracker(), emit=emit)


class SearchInput(BaseModel):
    query: str
    limit: int = 10


class SearchOutput(BaseModel):
    results: list[str]


def search_execute(input: SearchInput, ctx: ToolContext) -> dict:
    return {"results": [input.query] * min(input.limit, 2)}


search = define_tool(
    "search",
    "Search for information",
    SearchInput,
    execute=search_execute,
    output_schema=SearchOutput,
)


# --- define_tool and the runtime methods ---------------------------------------------


def test_spec_is_the_input_json_schema():
    assert search.spec() == ToolSpec(
        name="search",
        description="Search for information",
        parameters=SearchInput.model_json_schema(),
        strict=False,
    )
    assert search.spec().parameters["required"] == ["query"]


def test_strict_is_forwarded_to_the_spec():
    strict_tool = define_tool("s", "d", SearchInput, execute=search_execute, strict=True)

    assert strict_tool.spec().strict is True


def test_parse_input_validates_and_coerces():
    parsed = search.parse_input({"query": "x", "limit": "3"})

    assert parsed == SearchInput(query="x", limit=3)


def test_parse_input_treats_none_as_empty_object():
    class NoArgs(BaseModel):
        verbose: bool = False

    ping = define_tool("ping", "Ping", NoArgs, execute=lambda input, ctx: "pong")

    assert ping.parse_input(None) == NoArgs()


def test_invalid_arguments_raise_a_clear_tool_input_error():
    with pytest.raises(ToolInputError) as caught:
        search.parse_input({"limit": "many"})

    message = str(caught.value)
    assert message.startswith("Invalid arguments for tool 'search':")
    assert "- query: Field required" in message
    assert "- limit: Input should be a valid integer" in message
    assert caught.value.tool_name == "search"
    assert isinstance(caught.value.validation_error, ValidationError)


def test_non_object_arguments_are_a_tool_input_error():
    with pytest.raises(ToolInputError, match="search"):
        search.parse_input("{not json")


def test_run_calls_sync_execute():
    result = asyncio.run(search.run(SearchInput(query="q", limit=5), make_ctx()))

    assert result == {"results": ["q", "q"]}


def test_run_awaits_async_execute_and_passes_context():
    async def execute(input: SearchInput, ctx: ToolContext) -> str:
        await asyncio.sleep(0)
        return f"{ctx.session_id}/{ctx.tool_call_id}/{input.query}"

    async_tool = define_tool("a", "d", SearchInput, execute=execute)

    assert asyncio.run(async_tool.run(SearchInput(query="q"), make_ctx())) == "sess-1/call-1/q"


def test_run_propagates_execute_errors():
    def boom(input, ctx):
        raise RuntimeError("boom")

    failing = define_tool("f", "d", SearchInput, execute=boom)

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(failing.run(SearchInput(query="q"), make_ctx()))


def test_client_tool_is_not_run_by_the_server():
    picker = define_tool(
        "pick_file", "Pick a file", SearchInput, execute="client", client_timeout=30
    )

    assert picker.is_client is True
    assert search.is_client is False
    with pytest.raises(TypeError, match="not executed by the server"):
        asyncio.run(picker.run(SearchInput(query="q"), make_ctx()))


def test_dump_output_validates_against_output_schema():
    assert search.dump_output({"results": ["a"]}) == {"results": ["a"]}
    assert search.dump_output(SearchOutput(results=["b"])) == {"results": ["b"]}
    with pytest.raises(ValidationError):
        search.dump_output({"nope": 1})


def test_dump_output_without_schema_is_json():
    class Point(BaseModel):
        x: int

    plain = define_tool("p", "d", SearchInput, execute=search_execute)

    assert plain.dump_output(Point(x=1)) == {"x": 1}
    assert plain.dump_output([Point(x=1), {"y": (2, 3)}]) == [{"x": 1}, {"y": [2, 3]}]
    assert plain.dump_output(None) is None


# --- approvals -----------------------------------------------------------------------


def test_require_approval_bool():
    gated = define_tool("g", "d", SearchInput, execute=search_execute, require_approval=True)

    assert gated.needs_approval(SearchInput(query="q"), make_ctx()) is True
    assert search.needs_approval(SearchInput(query="q"), make_ctx()) is False


def test_require_approval_callable_is_evaluated_per_call():
    gated = define_tool(
        "g",
        "d",
        SearchInput,
        execute=search_execute,
        require_approval=lambda input, ctx: input.limit > 5,
    )

    assert gated.needs_approval(SearchInput(query="q", limit=6), make_ctx()) is True
    assert gated.needs_approval(SearchInput(query="q", limit=5), make_ctx()) is False


def test_require_approval_callable_fails_closed(caplog):
    caplog.set_level(logging.WARNING, logger="helix_dbos")

    def broken(input, ctx):
        raise KeyError("missing")

    gated = define_tool("g", "d", SearchInput, execute=search_execute, require_approval=broken)

    assert gated.needs_approval(SearchInput(query="q"), make_ctx()) is True
    assert any("requiring approval" in r.getMessage() for r in caplog.records)


# --- definition-time errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"execute": None}, "execute is required"),
        ({"execute": "client", "finish_with": True}, "cannot be finish_with"),
        ({"execute": "client", "require_approval": True}, "cannot require_approval"),
        ({"execute": "client", "require_approval": lambda i, c: False}, "cannot require_approval"),
        (
            {"finish_with": True, "require_approval": True},
            "finish_with tool cannot require_approval",
        ),
        ({"finish_with_transform": lambda out: out}, "requires finish_with=True"),
        ({"execute": lambda input: input}, r"two positional arguments \(input, ctx\)"),
        ({"execute": "server"}, "must be a function or 'client'"),
        ({"approval_timeout": 10}, "approval_timeout requires require_approval"),
        ({"client_timeout": 10}, "client_timeout requires execute='client'"),
        ({"require_approval": True, "approval_timeout": 0}, "positive"),
        ({"execute": "client", "client_timeout": -1}, "positive"),
        ({"output_schema": dict}, "output_schema must be a pydantic model class"),
    ],
)
def test_invalid_tool_definitions(options, match):
    kwargs: dict[str, Any] = {"execute": search_execute, **options}

    with pytest.raises(AgentDefinitionError, match=match):
        define_tool("t", "d", SearchInput, **kwargs)


def test_async_approval_predicate_is_rejected():
    async def decide(input, ctx):
        return True

    with pytest.raises(AgentDefinitionError, match="synchronous"):
        define_tool("t", "d", SearchInput, execute=search_execute, require_approval=decide)


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65, "ümlaut"])
def test_bad_tool_names(name):
    with pytest.raises(AgentDefinitionError, match="name must be 1-64 characters"):
        define_tool(name, "d", SearchInput, execute=search_execute)


def test_input_schema_must_be_a_model_class():
    with pytest.raises(AgentDefinitionError, match="input_schema must be a pydantic model class"):
        define_tool("t", "d", {"type": "object"}, execute=search_execute)


@pytest.mark.parametrize("execute", ["client", search_execute])
def test_base_model_itself_is_refused_as_a_schema_when_defined(execute):
    """BaseModel has no schema: refused when the tool is defined, not when the model is called."""
    with pytest.raises(AgentDefinitionError, match="input_schema must be a pydantic model class of your own"):
        define_tool("t", "d", BaseModel, execute)
    with pytest.raises(AgentDefinitionError, match="output_schema must be a pydantic model class of your own"):
        define_tool("t", "d", SearchInput, execute, output_schema=BaseModel)


def test_valid_names_and_direct_construction_are_validated_too():
    assert (
        define_tool("get-weather_2", "d", SearchInput, execute=search_execute).name
        == "get-weather_2"
    )
    with pytest.raises(AgentDefinitionError, match="execute is required"):
        Tool(name="t", description="d", input_schema=SearchInput, execute=None)


# --- @tool -------------------------------------------------------------------------


@tool
def lookup(query: str, limit: int = 3) -> list[str]:
    """Look things up."""
    return [query] * limit


@tool
async def get_weather(
    city: Annotated[str, Field(description="The city name")], ctx: ToolContext
) -> dict:
    """Get the current weather for a city."""
    ctx.emit("weather_requested", {"city": city})
    return {"city": city, "tempC": 22, "sky": "sunny", "session": ctx.session_id}


class Submission(BaseModel):
    answer: str
    verified: bool


@tool(name="submit_answer", description="Submit the final answer", finish_with=True)
def submit(answer: str, verified: bool = False) -> Submission:
    return Submission(answer=answer, verified=verified)


def test_decorator_derives_name_description_and_schema():
    assert isinstance(lookup, Tool)
    assert lookup.name == "lookup"
    assert lookup.description == "Look things up."
    schema = lookup.spec().parameters
    assert schema["properties"] == {
        "query": {"title": "Query", "type": "string"},
        "limit": {"default": 3, "title": "Limit", "type": "integer"},
    }
    assert schema["required"] == ["query"]
    assert lookup.output_schema is None


def test_decorator_excludes_the_context_parameter_and_keeps_field_metadata():
    schema = get_weather.spec().parameters

    assert list(schema["properties"]) == ["city"]
    assert schema["properties"]["city"]["description"] == "The city name"
    assert schema["required"] == ["city"]


def test_decorated_tools_run_with_fields_as_keywords():
    ctx = make_ctx()

    assert asyncio.run(lookup.run(lookup.parse_input({"query": "a", "limit": 2}), ctx)) == [
        "a",
        "a",
    ]
    weather = asyncio.run(get_weather.run(get_weather.parse_input({"city": "Paris"}), ctx))
    assert weather == {"city": "Paris", "tempC": 22, "sky": "sunny", "session": "sess-1"}
    assert ctx.events == [ToolEvent(type="weather_requested", data={"city": "Paris"})]


def test_decorated_execute_is_async_exactly_when_the_function_is():
    assert inspect.iscoroutinefunction(get_weather.execute)
    assert not inspect.iscoroutinefunction(lookup.execute)


def test_decorator_options_and_model_return_type():
    assert submit.name == "submit_answer"
    assert submit.description == "Submit the final answer"
    assert submit.finish_with is True
    assert submit.output_schema is Submission
    output = asyncio.run(submit.run(submit.parse_input({"answer": "42"}), make_ctx()))
    assert submit.dump_output(output) == {"answer": "42", "verified": False}


def test_decorator_without_docstring_has_empty_description():
    @tool
    def nodoc(x: int) -> int:
        return x

    assert nodoc.description == ""


def test_decorator_rejects_star_args_and_positional_only():
    def star(*items: str) -> None: ...

    def positional(x: int, /) -> None: ...

    with pytest.raises(AgentDefinitionError, match="parameter 'items'"):
        tool(star)
    with pytest.raises(AgentDefinitionError, match="parameter 'x'"):
        tool(positional)


def test_decorator_applies_definition_checks():
    with pytest.raises(AgentDefinitionError, match="cannot require_approval"):

        @tool(finish_with=True, require_approval=True)
        def bad(x: int) -> int:
            return x


# --- ToolContext -------------------------------------------------------------------


def test_tool_context_exposes_identity():
    ctx = make_ctx()

    assert (ctx.session_id, ctx.tool_call_id, ctx.agent_name, ctx.step) == (
        "sess-1",
        "call-1",
        "agent",
        2,
    )
    assert isinstance(ctx, HookContext)


def test_tool_context_reads_and_updates_state_through_the_tracker():
    tracker = FakeTracker({"notes": []})
    ctx = make_ctx(tracker)

    ctx.update_state(lambda draft: draft["notes"].append("n1"))

    assert ctx.get_state() == {"notes": ["n1"]}
    assert tracker.updates == 1


def test_emit_records_forwards_and_can_be_awaited():
    forwarded = []
    ctx = make_ctx(emit=lambda event_type, data: forwarded.append((event_type, data)))

    async def use() -> None:
        await ctx.emit("analysis_saved", {"id": "a1"})
        ctx.emit("plain", SearchOutput(results=["r"]))

    asyncio.run(use())

    assert ctx.events == [
        ToolEvent(type="analysis_saved", data={"id": "a1"}),
        ToolEvent(type="plain", data={"results": ["r"]}),
    ]
    assert forwarded == [("analysis_saved", {"id": "a1"}), ("plain", {"results": ["r"]})]


# --- tool examples -----------------------------------------------------------------


class SubmitInput(BaseModel):
    data: str


async def submit_execute(input: SubmitInput, ctx: ToolContext) -> dict:
    if len(input.data) < 10:
        raise ValueError("Data too short. Please provide more detail.")
    ctx.update_state(lambda draft: draft.update(lastSubmission=input.data))
    return {"result": input.data}


submit_tool = define_tool("submit", "Submit", SubmitInput, execute=submit_execute, finish_with=True)


def run_finish_with(t: Tool, call_id: str, arguments: dict, ctx: ToolContext):
    """What the runtime does for one finishWith call: run it, describe the outcome."""
    try:
        output = t.dump_output(asyncio.run(t.run(t.parse_input(arguments), ctx)))
    except Exception as error:
        return t.outcome(call_id, error=str(error))
    return t.outcome(call_id, output=output)


def test_seed_unit_testing_the_tool_with_a_mock_context():
    tracker = FakeTracker()
    result = asyncio.run(submit_tool.run(SubmitInput(data="test data!"), make_ctx(tracker)))

    assert result == {"result": "test data!"}
    assert tracker.state == {"lastSubmission": "test data!"}  # state changes are persisted


def test_seed_execute_throws_then_model_retries_and_completes():
    ctx = make_ctx()
    first = run_finish_with(submit_tool, "c1", {"data": "Hi"}, ctx)

    assert first.error == "Data too short. Please provide more detail."
    assert resolve_finish_with([first]).status == "continue"

    second = run_finish_with(
        submit_tool, "c2", {"data": "A longer and more detailed response"}, ctx
    )
    resolution = resolve_finish_with([second])
    assert resolution.status == "completed"
    assert resolution.output == {"result": "A longer and more detailed response"}


class ProcessInput(BaseModel):
    rawData: str
    multiplier: float | None = None


class ProcessOutput(BaseModel):
    rawData: str
    multiplier: float | None = None
    processedAt: str


process_data = define_tool(
    "process_data",
    "Process and submit the data",
    ProcessInput,
    execute=lambda input, ctx: {
        "rawData": input.rawData,
        "multiplier": input.multiplier,
        "processedAt": "2024-01-01T00:00:00Z",
    },
    output_schema=ProcessOutput,
    finish_with=True,
    finish_with_transform=lambda out: {"result": out.rawData.upper(), "score": out.multiplier or 1},
)


def test_seed_finish_with_transform_flow():
    outcome = run_finish_with(process_data, "p1", {"rawData": "hello", "multiplier": 5}, make_ctx())

    assert outcome.output == {
        "rawData": "hello",
        "multiplier": 5.0,
        "processedAt": "2024-01-01T00:00:00Z",
    }
    assert resolve_finish_with([outcome]).output == {"result": "HELLO", "score": 5.0}


def test_seed_finish_with_transform_that_raises_fails_the_agent():
    def transform(out):
        if not out["valid"]:
            raise ValueError("Invalid output")
        return {"result": out["data"]}

    class DataInput(BaseModel):
        data: str

    failing = define_tool(
        "submit",
        "Submit",
        DataInput,
        execute=lambda input, ctx: {"data": input.data, "valid": False},
        finish_with=True,
        finish_with_transform=transform,
    )
    resolution = resolve_finish_with([run_finish_with(failing, "s1", {"data": "x"}, make_ctx())])

    assert resolution.status == "failed"
    assert "Invalid output" in resolution.error


def test_outcome_of_a_regular_tool_is_not_finish_with():
    outcome = search.outcome("t1", output={"results": []})

    assert (outcome.finish_with, outcome.transform, outcome.succeeded) == (False, None, True)
    assert resolve_finish_with([outcome]).status == "continue"


class AnalysisInput(BaseModel):
    analysis: str = Field(min_length=50)
    confidence: float = Field(ge=0, le=1)
    saveToDb: bool = True


class AnalysisOutput(BaseModel):
    analysis: str
    confidence: float
    savedId: str | None = None


async def submit_analysis_execute(input: AnalysisInput, ctx: ToolContext) -> AnalysisOutput:
    if input.confidence < 0.3:
        raise ValueError("Confidence too low. Please gather more evidence.")
    saved_id = None
    if input.saveToDb:
        saved_id = f"{ctx.agent_name}-1"
        await ctx.emit("analysis_saved", {"id": saved_id})
    ctx.update_state(lambda draft: draft.update(lastSavedId=saved_id))
    return AnalysisOutput(analysis=input.analysis, confidence=input.confidence, savedId=saved_id)


submit_analysis = define_tool(
    "submit_analysis",
    "Submit the final analysis after validation",
    AnalysisInput,
    execute=submit_analysis_execute,
    output_schema=AnalysisOutput,
    finish_with=True,
)


def test_seed_complete_example_submit_analysis():
    with pytest.raises(ToolInputError, match="analysis: String should have at least 50 characters"):
        submit_analysis.parse_input({"analysis": "short", "confidence": 0.9})
    with pytest.raises(ToolInputError, match="confidence: Input should be less than or equal to 1"):
        submit_analysis.parse_input({"analysis": "x" * 50, "confidence": 2})

    tracker = FakeTracker({"lastSavedId": None})
    ctx = make_ctx(tracker)
    low = run_finish_with(submit_analysis, "a1", {"analysis": "x" * 50, "confidence": 0.1}, ctx)
    assert low.error == "Confidence too low. Please gather more evidence."

    good = run_finish_with(submit_analysis, "a2", {"analysis": "y" * 50, "confidence": 0.8}, ctx)
    assert good.output == {"analysis": "y" * 50, "confidence": 0.8, "savedId": "agent-1"}
    assert ctx.events == [ToolEvent(type="analysis_saved", data={"id": "agent-1"})]
    assert tracker.state == {"lastSavedId": "agent-1"}
    assert resolve_finish_with([low, good]).output == good.output


def test_the_openai_request_gets_its_own_copy_of_a_tools_schema() -> None:
    """An agent's tool specs are shared by its model calls: what goes to litellm is a copy."""
    from helix_dbos.llm.openai_format import to_openai_tools

    spec = define_tool("lookup", "Look up", SearchInput, execute=lambda a, ctx: {}).spec()
    [sent] = to_openai_tools([spec], strict_names=set())
    sent["function"]["parameters"]["properties"].clear()

    assert spec.parameters["properties"]
