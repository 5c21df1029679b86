"""The chat routes against the AI SDK's own client: ``AbstractChat`` and
``DefaultChatTransport`` of the real ``ai`` npm package, in Node (tests/chat/node), over a
real uvicorn and Postgres. Each test reads the UI messages the client built and the
chunks the server sent."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, FullThreadPool, Serving, call, calls, rows, text, unique, use_model

from helix_dbos import ToolContext, define_agent, define_tool
from helix_dbos.server import create_app

NODE_DIR = Path(__file__).resolve().parent.parent / "chat" / "node"


def node_chat(base: str, chat_id: str, steps: list[dict[str, Any]], **program: Any) -> dict[str, Any]:
    """Run the AI SDK chat client through ``steps``; what it ends with."""
    assert shutil.which("node"), "Node is needed for the chat tests (Node 20 and npm)"
    assert (NODE_DIR / "node_modules" / "ai").is_dir(), "run scripts/test.sh (it runs npm ci in tests/chat/node)"
    spec = {"api": f"{base}/chat", "chatId": chat_id, "steps": steps, **program}
    proc = subprocess.run(
        ["node", str(NODE_DIR / "chat_client.mjs"), json.dumps(spec)], capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def chunk_types(request: dict[str, Any]) -> list[str]:
    return [c if isinstance(c, str) else c["type"] for c in request["chunks"]]


def assistant(result: dict[str, Any]) -> dict[str, Any]:
    found = [m for m in result["messages"] if m["role"] == "assistant"]
    assert len(found) == 1, result["messages"]
    return found[0]


def kinds(message: dict[str, Any]) -> list[str]:
    return [p["type"] for p in message["parts"]]


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, allow_unauthenticated=True, sse_keepalive=0.5))
    yield serving.url
    serving.stop()


class City(BaseModel):
    city: str


class Refund(BaseModel):
    order_id: str
    amount: int


class Question(BaseModel):
    question: str


class Reply(BaseModel):
    escalate: bool


def weather(args: City, ctx: ToolContext) -> dict[str, Any]:
    return {"city": args.city, "temp_c": 22}


def refund(args: Refund, ctx: ToolContext) -> dict[str, Any]:
    return {"refunded": args.amount}


TOOLS = [
    define_tool("weather", "The weather in a city.", City, weather),
    define_tool("refund", "Refund an order.", Refund, refund, require_approval=True),
    define_tool("ask_customer", "Ask the customer.", Question, "client", output_schema=Reply),
]


def chat_agent(executor: Any) -> str:
    agent = define_agent(unique("chat"), tools=TOOLS)
    executor.register(agent)
    return agent.name


ANSWER = "DBOS checkpoints every step in Postgres, so a crash loses nothing."


def test_a_text_answer_streams_as_deltas_into_one_text_part(executor, base):
    use_model(executor, text(ANSWER), stream_chunk_chars=6, delta_delay_seconds=0.01)
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Why DBOS?"}], agent=chat_agent(executor))

    message = assistant(result)
    assert result["status"] == "ready" and result["error"] is None
    assert message["id"] == f"{sid}:run:1"
    assert kinds(message) == ["step-start", "text"]
    assert message["parts"][1] == {"type": "text", "text": ANSWER, "state": "done"}
    assert message["metadata"]["status"] == "completed" and message["metadata"]["usage"]["total_tokens"] > 0
    [request] = result["requests"]
    deltas = [c["delta"] for c in request["chunks"] if isinstance(c, dict) and c["type"] == "text-delta"]
    assert len(deltas) > 5 and "".join(deltas) == ANSWER  # live token deltas, none repeated
    assert chunk_types(request)[:2] == ["start", "start-step"] and chunk_types(request)[-2:] == ["finish", "[DONE]"]


def test_a_tool_call_and_its_output_are_one_tool_part(executor, base):
    use_model(executor, calls(call("w1", "weather", {"city": "Paris"}), content="Let me look."), text("22 °C in Paris."))
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Weather in Paris?"}], agent=chat_agent(executor))

    message = assistant(result)
    assert kinds(message) == ["step-start", "text", "tool-weather", "step-start", "text"]
    tool_part = message["parts"][2]
    assert tool_part["state"] == "output-available" and tool_part["toolCallId"] == "w1"
    assert tool_part["input"] == {"city": "Paris"} and tool_part["output"] == {"city": "Paris", "temp_c": 22}
    assert message["parts"][4]["text"] == "22 °C in Paris."


def test_an_approval_is_requested_and_granted_with_addToolApprovalResponse(executor, base):
    use_model(executor, calls(call("r1", "refund", {"order_id": "A-42", "amount": 20})), text("Refunded A-42."))
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Refund A-42"}, {"approve": True}], agent=chat_agent(executor))

    message = assistant(result)
    paused, continued = result["requests"]
    assert chunk_types(paused)[-4:] == ["tool-approval-request", "finish-step", "finish", "[DONE]"]
    assert chunk_types(continued)[:2] == ["start", "tool-output-available"]
    assert kinds(message) == ["step-start", "tool-refund", "step-start", "text"]
    assert message["parts"][1]["state"] == "output-available" and message["parts"][1]["output"] == {"refunded": 20}
    assert message["parts"][3]["text"] == "Refunded A-42."
    assert rows(executor, "SELECT approved FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s)", id=sid) == [{"approved": True}]


def test_a_denial_ends_as_output_denied(executor, base):
    use_model(executor, calls(call("r1", "refund", {"order_id": "A-43", "amount": 900})), text("I could not refund A-43."))
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Refund A-43"}, {"approve": False, "reason": "too much"}], agent=chat_agent(executor))

    message = assistant(result)
    assert kinds(message) == ["step-start", "tool-refund", "step-start", "text"]
    assert message["parts"][1]["state"] == "output-denied"
    assert rows(executor, "SELECT approved, reason FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s)", id=sid) == [
        {"approved": False, "reason": "too much"}
    ]


def test_a_client_tool_is_answered_with_addToolOutput(executor, base):
    use_model(
        executor, calls(call("q1", "ask_customer", {"question": "Escalate?"})),
        lambda messages: text(f"The customer said {messages[-1].content}."),
    )
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Help me"}], agent=chat_agent(executor), clientTools={"ask_customer": {"escalate": True}})

    message = assistant(result)
    assert kinds(message) == ["step-start", "tool-ask_customer", "step-start", "text"]
    assert message["parts"][1]["state"] == "output-available" and message["parts"][1]["output"] == {"escalate": True}
    assert message["parts"][3]["text"] == 'The customer said {"escalate":true}.'


LONG = " ".join(f"word{n}" for n in range(60))


def test_a_reload_mid_answer_resumes_the_same_message_with_nothing_lost_or_repeated(executor, base):
    use_model(executor, calls(call("w1", "weather", {"city": "Oslo"})), text(LONG), stream_chunk_chars=4, delta_delay_seconds=0.02)
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Weather in Oslo?", "dropAfter": 5}, {"reload": True}], agent=chat_agent(executor))

    message = assistant(result)
    dropped, resumed = result["requests"]
    assert "finish" not in chunk_types(dropped)
    assert resumed["method"] == "GET" and resumed["status"] == 200
    assert resumed["chunks"][0] == {"type": "start", "messageId": f"{sid}:run:1", "messageMetadata": {"sessionId": sid, "run": 1}}
    assert kinds(message) == ["step-start", "tool-weather", "step-start", "text"]
    assert message["parts"][1]["output"] == {"city": "Oslo", "temp_c": 22}
    assert message["parts"][3] == {"type": "text", "text": LONG, "state": "done"}


def test_resume_answers_204_when_nothing_runs(executor, base):
    assert httpx.get(f"{base}/chat/{unique('nothing')}/stream").status_code == 204


class Notes(BaseModel):
    notes: list[str] = []


def test_live_state_reaches_the_chat_as_one_data_state_part_before_the_tool_ends(executor, base):
    def note(args: City, ctx: ToolContext) -> dict[str, Any]:
        ctx.update_state(lambda draft: draft.notes.append(args.city))
        # A long tool: its live patch is shown while it runs. (A reader that lags behind
        # the commit reads the committed state first and skips the older live patch.)
        time.sleep(1.0)
        return {"noted": args.city}

    agent = define_agent(unique("chat"), tools=[define_tool("note", "Note a city.", City, note)], state_schema=Notes)
    executor.register(agent)
    use_model(executor, calls(call("n1", "note", {"city": "Lima"})), text("Noted."))
    sid = unique("chat")

    result = node_chat(base, sid, [{"send": "Note Lima"}], agent=agent.name)

    message = assistant(result)
    assert [p for p in message["parts"] if p["type"] == "data-state"] == [
        {"type": "data-state", "id": "state", "data": {"notes": ["Lima"]}}
    ]
    chunks = [c for c in result["requests"][0]["chunks"] if isinstance(c, dict)]
    states = [(n, c["data"]) for n, c in enumerate(chunks) if c["type"] == "data-state"]
    result_at = next(n for n, c in enumerate(chunks) if c["type"] == "tool-output-available")
    # the state at the start, the tool's live patch (before its result), the step's commit
    assert [data for _, data in states] == [{"notes": []}, {"notes": ["Lima"]}, {"notes": ["Lima"]}]
    assert states[1][0] < result_at < states[2][0]


def sse_chunks(response: httpx.Response) -> list[Any]:
    """The UI message stream chunks of a response (``[DONE]`` as the string)."""
    found: list[Any] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def note(args: City, ctx: ToolContext) -> dict[str, Any]:
    ctx.update_state(lambda draft: draft.notes.append(args.city))
    return {"noted": args.city}


def test_the_chat_routes_answer_while_every_thread_of_the_pool_is_held(executor):
    app = create_app(executor, allow_unauthenticated=True, sse_keepalive=0.5)
    pool = FullThreadPool(app)
    serving = Serving(app)
    agent = define_agent(unique("chat"), tools=[*TOOLS, define_tool("note", "Note a city.", City, note)], state_schema=Notes)
    executor.register(agent)
    use_model(
        executor, calls(call("n1", "note", {"city": "Lima"})), calls(call("r1", "refund", {"order_id": "A-44", "amount": 5})),
        text("Refunded A-44."), calls(call("r2", "refund", {"order_id": "A-45", "amount": 6})),
    )
    sid = unique("chat")

    try:
        with pool.held(serving.url), httpx.Client(base_url=serving.url, timeout=RESULT_TIMEOUT) as client:
            approved = node_chat(serving.url, sid, [{"send": "Note Lima, refund A-44"}, {"approve": True}], agent=agent.name)
            waiting = node_chat(serving.url, sid, [{"send": "Refund A-45"}])  # the next turn starts from the state
            with client.stream("GET", f"/chat/{sid}/stream") as response:
                resumed = sse_chunks(response)
            interrupted = client.post(f"/chat/{sid}/interrupt").json()
    finally:
        serving.stop()

    def states(chunks: list[Any]) -> list[Any]:
        return [c["data"] for c in chunks if isinstance(c, dict) and c["type"] == "data-state"]

    assert assistant(approved)["parts"][-1]["text"] == "Refunded A-44."
    assert states(approved["requests"][1]["chunks"]) == [{"notes": ["Lima"]}]  # the state where the message paused
    assert chunk_types(waiting["requests"][0])[-4:] == ["tool-approval-request", "finish-step", "finish", "[DONE]"]
    assert states(waiting["requests"][0]["chunks"]) == [{"notes": ["Lima"]}]
    assert resumed[0] == {"type": "start", "messageId": f"{sid}:run:2", "messageMetadata": {"sessionId": sid, "run": 2}}
    assert resumed[1:] == waiting["requests"][0]["chunks"][1:]  # the same message, replayed
    assert interrupted == {"session_id": sid, "interrupt_requested": True}
