"""The operator console on a real uvicorn: the inbox, answers through forms
(approver = the signed-in principal), CSRF refusals that change nothing, hostile text shown
inert, a client result that does not validate shown again with nothing lost, session
pages and controls; and a real headless Chromium approving a call and seeing the run end."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    Serving,
    agent,
    call,
    calls,
    family_model,
    rows,
    sub,
    text,
    unique,
    use_model,
    wait_for,
)
from starlette.requests import Request

from helix_dbos import ApprovalResponse, create_sub_agent_tool, define_agent, define_tool
from helix_dbos.server import create_app

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


class Refund(BaseModel):
    amount: int
    note: str = ""


class City(BaseModel):
    city: str


def authenticate(request: Request) -> str | None:
    return request.headers.get("x-user") or request.cookies.get("user")


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, authenticate=authenticate))
    yield serving.url
    serving.stop()


@pytest.fixture
def ana(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers={"X-User": "ana"}, timeout=RESULT_TIMEOUT) as client:
        yield client


def token(page: httpx.Response) -> str:
    found = TOKEN.search(page.text)
    assert found, "the page has no CSRF token"
    return found.group(1)


def waiting_refund(executor: Any, note: str = "") -> tuple[str, Any]:
    refund = define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)
    agent_ = define_agent(unique("console"), tools=[refund])
    use_model(executor, calls(call("r1", "refund", {"amount": 7, "note": note})), text("refunded"))
    handle = executor.execute(agent_, "refund please")
    wait_for(lambda: executor.list_pending(handle.session_id), what="the approval request")
    return handle.session_id, handle


def test_the_inbox_shows_pending_calls_with_hostile_text_inert(executor, ana):
    sid, handle = waiting_refund(executor, note='<script>alert("x")</script> & "quotes"')

    page = ana.get("/console/")

    assert page.status_code == 200 and "signed in as ana" in page.text
    assert f'id="call-{sid}-r1"' in page.text
    assert "&lt;script&gt;alert(" in page.text and '<script>alert("x")' not in page.text
    executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="r1", approved=False))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_approve_through_the_form_records_the_principal_and_redirects_with_a_flash(executor, ana):
    sid, handle = waiting_refund(executor)
    form = {"csrf_token": token(ana.get("/console/")), "session_id": sid, "tool_call_id": "r1", "next": "inbox",
            "action": "approve"}

    posted = ana.post("/console/answer", data=form)

    assert posted.status_code == 303 and posted.headers["location"] == "/console/"
    inbox = ana.get("/console/").text
    assert f"Approved r1 of session {sid}." in inbox
    assert f'value="{sid}"' not in inbox, "the inbox still lists the answered call"
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert rows(executor, "SELECT answered_by, approved FROM helix.tool_call_answers WHERE session_id = :s", s=sid) == [
        {"answered_by": "ana", "approved": True}
    ]
    again = ana.post("/console/answer", data={**form, "action": "deny"})
    assert "was already answered" in ana.get(again.headers["location"]).text


def test_a_post_without_a_valid_csrf_token_or_from_another_origin_is_refused_and_changes_nothing(executor, ana, base):
    sid, handle = waiting_refund(executor)
    good = token(ana.get("/console/"))
    form = {"session_id": sid, "tool_call_id": "r1", "next": "inbox", "action": "approve"}

    missing = ana.post("/console/answer", data=form)
    forged = ana.post("/console/answer", data={**form, "csrf_token": "abc.def"})
    with httpx.Client(base_url=base, headers={"X-User": "ana"}) as stranger:  # another browser: no cookie
        no_cookie = stranger.post("/console/answer", data={**form, "csrf_token": good})
    elsewhere = ana.post("/console/answer", data={**form, "csrf_token": good},
                         headers={"Origin": "https://evil.example"})
    control = ana.post("/console/control", data={"session_id": sid, "action": "abort"})

    assert [r.status_code for r in (missing, forged, no_cookie, elsewhere, control)] == [403] * 5
    assert "CSRF" in missing.text and "evil.example" in elsewhere.text
    assert [c.tool_call_id for c in executor.list_pending(sid)] == ["r1"]  # still waiting, nothing recorded
    assert rows(executor, "SELECT 1 FROM helix.tool_call_answers WHERE session_id = :s", s=sid) == []
    ana.post("/console/answer", data={**form, "csrf_token": good})
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_a_client_result_that_does_not_validate_is_shown_again_with_what_was_typed(executor, ana):
    lookup = define_tool("lookup", "Ask the client.", City, "client", output_schema=City)
    agent_ = define_agent(unique("console-client"), tools=[lookup])
    use_model(executor, calls(call("c1", "lookup", {"city": "?"})), text("done"))
    handle = executor.execute(agent_, "where?")
    sid = handle.session_id
    wait_for(lambda: executor.list_pending(sid), what="the client tool call")
    page = ana.get(f"/console/sessions/{sid}")
    form = {"csrf_token": token(page), "session_id": sid, "tool_call_id": "c1", "next": "session", "action": "result"}

    not_json = ana.post("/console/answer", data={**form, "result": "{city: Paris"})
    wrong = ana.post("/console/answer", data={**form, "result": '{"town": "Paris"}'})

    assert not_json.status_code == 422 and "the result is not JSON" in not_json.text
    assert "{city: Paris</textarea>" in not_json.text  # nothing typed is lost
    assert wrong.status_code == 422 and "&#34;town&#34;: &#34;Paris&#34;}</textarea>" in wrong.text, wrong.text[-3000:]
    assert [c.tool_call_id for c in executor.list_pending(sid)] == ["c1"]
    done = ana.post("/console/answer", data={**form, "result": '{"city": "Paris"}'})
    assert done.status_code == 303 and done.headers["location"] == f"/console/sessions/{sid}"
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_session_pages_list_filter_tree_and_controls(executor, ana):
    gate = Gate()
    child = agent(unique("console-child"), tools=[gate.tool()])
    parent = agent(unique("console-parent"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [calls(call("p1", f"subagent__{child.name}", {"input": "go"})), text("parent done")],
        child: [calls(call("g1", "wait_here")), text("child done")],
    })
    handle = executor.execute(parent, "delegate")
    sid = handle.session_id
    gate.wait_entered()

    page = ana.get(f"/console/sessions/{sid}")
    assert page.status_code == 200 and sub(sid, "p1") in page.text and child.name in page.text  # the tree
    assert 'value="interrupt"' in page.text and 'value="resume"' not in page.text
    listed = ana.get("/console/sessions", params={"status": "active"}).text
    assert sid in listed and 'selected>active' in listed.replace('"active" selected', "selected")
    interrupt = ana.post("/console/control", data={"csrf_token": token(page), "session_id": sid, "action": "interrupt"})
    assert interrupt.status_code == 303
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "interrupted"
    page = ana.get(f"/console/sessions/{sid}")
    assert "Interrupt requested." in page.text and 'value="resume"' in page.text
    assert "delegate" in page.text and "Sub-agents" in page.text  # transcript and tree
    missing = ana.get("/console/sessions/no-such-session")
    assert missing.status_code == 404 and "no session" in missing.text


def test_the_workers_page_lists_this_process_as_live(executor, ana):
    import os

    from dbos import DBOS

    page = ana.get("/console/workers")
    assert page.status_code == 200, page.text
    row = next(line for line in page.text.split("<tr>") if f"<td>{DBOS.executor_id}</td>" in line)
    assert ">live<" in row and f"<td>{os.getpid()}</td>" in row, row


def test_without_a_principal_the_console_answers_as_console(executor):
    sid, handle = waiting_refund(executor)
    serving = Serving(create_app(executor, allow_unauthenticated=True))
    try:
        with httpx.Client(base_url=serving.url, timeout=RESULT_TIMEOUT) as client:
            form = {"csrf_token": token(client.get("/console/")), "session_id": sid, "tool_call_id": "r1",
                    "next": "inbox", "action": "deny", "reason": "not today"}
            assert client.post("/console/answer", data=form).status_code == 303
    finally:
        serving.stop()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert rows(executor, "SELECT answered_by, reason FROM helix.tool_call_answers WHERE session_id = :s", s=sid) == [
        {"answered_by": "console", "reason": "not today"}
    ]


def test_a_real_browser_approves_a_call_and_sees_the_run_finish(executor, base):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    sid, handle = waiting_refund(executor)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        browser.get(f"{base}/console/sessions")  # sets the cookie that authenticates this browser
        browser.add_cookie({"name": "user", "value": "bea"})
        browser.get(f"{base}/console/")
        card = browser.find_element(By.ID, f"call-{sid}-r1")
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        WebDriverWait(browser, 20).until(lambda b: f"Approved r1 of session {sid}." in b.page_source)
        browser.get(f"{base}/console/sessions/{sid}")
        WebDriverWait(browser, 20).until(
            lambda b: "  finish  " in b.find_element(By.ID, "tail").text  # the run's end in the live tail (SSE)
        )
        browser.refresh()
        assert browser.find_element(By.ID, "status").text == "completed"
    finally:
        browser.quit()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert rows(executor, "SELECT answered_by FROM helix.tool_call_answers WHERE session_id = :s", s=sid) == [
        {"answered_by": "bea"}
    ]
