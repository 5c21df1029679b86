import time
from pydantic import BaseModel
from helix_dbos import define_agent, define_tool, tool, MockLLMAdapter, ToolContext
from helix_dbos.runtime.hitl import ApprovalResponse, ClientToolResult

class In(BaseModel):
    amount: int

ran = []
def pay(i, ctx):
    ran.append(i.amount); return {"paid": i.amount}

pay_tool = define_tool(name="pay", description="Pay.", input_schema=In, execute=pay, require_approval=True)
ask = define_tool(name="ask_user", description="Ask.", input_schema=In, execute="client", output_schema=In)

def test_hitl(executor):
    agent = define_agent(name="hitl-smoke", system_prompt="x", tools=[pay_tool, ask])
    llm = MockLLMAdapter()
    llm.add_response({"type": "tool_calls", "tool_calls": [{"id": "p1", "name": "pay", "arguments": {"amount": 5}}, {"id": "p2", "name": "pay", "arguments": {"amount": 7}}, {"id": "c1", "name": "ask_user", "arguments": {"amount": 1}}]})
    llm.add_response({"type": "text", "content": "done"})
    executor.llm = llm
    h = executor.execute(agent, "go")
    for _ in range(200):
        if len(executor.list_pending(h.session_id)) == 3: break
        time.sleep(0.05)
    s = executor.get_session(h.session_id)
    print(s.status, [p.tool_call_id for p in s.pending])
    print(executor.submit_tool_result(h.session_id, ApprovalResponse(tool_call_id="p2", approved=False, reason="too much")))
    print(executor.submit_tool_result(h.session_id, ClientToolResult(tool_call_id="c1", result={"amount": 3})))
    print(executor.submit_tool_result(h.session_id, ApprovalResponse(tool_call_id="p1", approved=True, approver="ana")))
    print(executor.submit_tool_result(h.session_id, ApprovalResponse(tool_call_id="p1", approved=False)))
    r = h.result(timeout=30)
    print(r)
    for m in executor.get_session(h.session_id).messages: print(m)
    print(ran, executor.get_usage(h.session_id))
    assert r.status == "completed" and ran == [5]
