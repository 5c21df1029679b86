"""The operator console on a real uvicorn: the inbox, answers through forms (approver =
the signed-in principal), CSRF refusals that change nothing, hostile text shown inert, a
client result that does not validate shown again with nothing lost, session pages and
controls. In a real headless Chromium: approving a call and seeing the run end; an
answer shown as received until its run takes it, the status following the run without a
reload; every section of a session page and the inbox following a call asked for and
answered elsewhere, with no reload; a run's adoption; who answered, when and why; the
live tail as log lines; a run's output as text or pretty JSON, never as markup."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from chromium import headless_chromium
from runtime_testkit import (
    RESULT_TIMEOUT,
    FullThreadPool,
    Gate,
    Serving,
    agent,
    call,
    calls,
    family_model,
    finish,
    rows,
    sub,
    text,
    unique,
    use_model,
    wait_for,
)
from starlette.requests import Request

from helix_dbos import AgentHooks, ApprovalResponse, create_sub_agent_tool, define_agent, define_tool
from helix_dbos import admin
from helix_dbos.server import create_app

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


class Refund(BaseModel):
    amount: int
    note: str = ""


class City(BaseModel):
    city: str


def authenticate(request: Request) -> str | None:
    return request.headers.get("x-user") or request.cookies.get("user")


def operators(principal: Any, action: Any, session: Any) -> bool:
    """The console's users here are operators: they see and answer every session (who
    sees what otherwise is tests/runtime/test_owners.py's)."""
    return True


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, authenticate=authenticate, authorize=operators))
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


def refund_tool() -> Any:
    return define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)


def waiting_refund(executor: Any, note: str = "") -> tuple[str, Any]:
    agent_ = define_agent(unique("console"), tools=[refund_tool()])
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
    assert rows(executor, "SELECT answered_by, approved FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=sid) == [
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
    assert rows(executor, "SELECT 1 FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=sid) == []
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


def test_the_answers_of_client_calls_show_the_submitted_result_and_the_reported_error(executor, ana):
    lookup = define_tool("lookup", "Ask the client.", City, "client", output_schema=City)
    agent_ = define_agent(unique("console-results"), tools=[lookup])
    use_model(executor, calls(call("c1", "lookup", {"city": "?"}), call("c2", "lookup", {"city": "!"})), text("done"))
    handle = executor.execute(agent_, "where?")
    sid = handle.session_id
    wait_for(lambda: len(executor.list_pending(sid)) == 2, what="both client tool calls")
    form = {"csrf_token": token(ana.get(f"/console/sessions/{sid}")), "session_id": sid, "next": "session"}

    result = '{"city": "<i>Nice</i>"}'
    ana.post("/console/answer", data={**form, "tool_call_id": "c1", "action": "result", "result": result})
    ana.post("/console/answer", data={**form, "tool_call_id": "c2", "action": "error", "error": "GPS <off>"})

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    page = ana.get(f"/console/sessions/{sid}").text
    result = page[page.index('<tr id="answer-c1">'):page.index('<tr id="answer-c2">')]
    error = page[page.index('<tr id="answer-c2">'):page.index("</table>", page.index('<tr id="answer-c2">'))]
    assert 'answer-result">result</span>' in result and "lookup" in result
    assert '<pre class="submitted">{\n  &#34;city&#34;: &#34;&lt;i&gt;Nice&lt;/i&gt;&#34;\n}</pre>' in result
    assert 'answer-error">error</span>' in error and '<span class="why">GPS &lt;off&gt;</span>' in error
    assert "submitted" not in error


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
    assert rows(executor, "SELECT answered_by, reason FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=sid) == [
        {"answered_by": "console", "reason": "not today"}
    ]


# --- in a real headless Chromium -------------------------------------------------------------


@pytest.fixture
def browser(base: str) -> Iterator[Any]:
    """Debian's headless Chromium, signed in as ``bea`` (the cookie ``authenticate`` reads)."""
    driver = headless_chromium()
    try:
        driver.get(f"{base}/console/sessions")  # the cookie belongs to this origin
        driver.add_cookie({"name": "user", "value": "bea"})
        yield driver
    finally:
        driver.quit()


def until(browser: Any, condition: Any, what: str) -> Any:
    """Wait for ``condition``; an element the page re-rendered while it was read is read again."""
    waiting = WebDriverWait(browser, RESULT_TIMEOUT, ignored_exceptions=[StaleElementReferenceException])
    return waiting.until(condition, message=f"waited for {what}")


def by_id(browser: Any, element_id: str) -> Any:
    return browser.find_element(By.ID, element_id)


def tail_lines(browser: Any) -> list[dict[str, str]]:
    """The live tail's lines, each as its cells."""
    return browser.execute_script(
        "return [...document.querySelectorAll('#tail li')].map((li) => ({type: li.dataset.type,"
        " at: li.querySelector('.at').textContent, where: li.querySelector('.where').textContent,"
        " kind: li.querySelector('.type').textContent, text: li.querySelector('.text').textContent}))"
    )


def test_a_real_browser_approves_a_call_and_sees_the_run_finish(executor, base, browser):
    sid, handle = waiting_refund(executor)
    browser.get(f"{base}/console/")
    by_id(browser, f"call-{sid}-r1").find_element(By.CSS_SELECTOR, "button.approve").click()
    until(browser, lambda b: f"Approved r1 of session {sid}." in b.page_source, "the flash")
    browser.get(f"{base}/console/sessions/{sid}")
    until(browser, lambda b: any(line["type"] == "finish" for line in tail_lines(b)), "the run's end in the tail")
    browser.refresh()
    assert by_id(browser, "status").text == "completed"
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert rows(executor, "SELECT answered_by FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=sid) == [
        {"answered_by": "bea"}
    ]


def test_in_a_browser_an_answer_shows_as_received_then_taken_and_the_status_follows_the_run(executor, base, browser):
    entered, release = threading.Event(), threading.Event()

    async def hold(reason: str, ctx: Any) -> None:  # the run has taken the answer; its step commits after this
        entered.set()
        await asyncio.to_thread(release.wait, RESULT_TIMEOUT)

    lookup = define_tool("lookup", "Ask the client.", City, "client", output_schema=City)
    agent_ = define_agent(unique("console-held"), tools=[lookup], hooks=AgentHooks(on_agent_resumed=hold))
    use_model(executor, calls(call("c1", "lookup", {"city": "?"})), text("found it"))
    handle = executor.execute(agent_, "where?")
    sid = handle.session_id
    try:
        wait_for(lambda: executor.list_pending(sid), what="the client tool call")
        browser.get(f"{base}/console/sessions/{sid}")
        assert by_id(browser, "status").text == "awaiting_client_tool"
        assert browser.find_elements(By.ID, "status-note") == []
        card = by_id(browser, f"call-{sid}-c1")
        card.find_element(By.NAME, "result").send_keys('{"city": "Paris"}')
        card.find_element(By.CSS_SELECTOR, "button.primary").click()
        until(browser, lambda b: f"Gave a result to c1 of session {sid}." in b.page_source, "the flash")

        # The session's row says awaiting_client_tool until the run commits the step; the
        # page says where the answer is: received (the waiter has not handed over yet) or taken.
        assert by_id(browser, "status").text == "awaiting_client_tool"
        assert by_id(browser, "status-note").text in (
            "answer received · waiting for the run to take it", "answer taken · the run is settling step 1"
        )
        card = by_id(browser, f"call-{sid}-c1")
        assert "received" in card.get_attribute("class") and not card.find_elements(By.TAG_NAME, "form")
        assert card.find_element(By.CSS_SELECTOR, ".answer .pill").text == "result"
        assert card.find_element(By.CSS_SELECTOR, ".submitted").text == '{\n  "city": "Paris"\n}'
        assert entered.wait(RESULT_TIMEOUT), "the run never took the answer"
        browser.refresh()
        assert by_id(browser, "status").text == "awaiting_client_tool"
        assert by_id(browser, "status-note").text == "answer taken · the run is settling step 1"
        assert by_id(browser, f"call-{sid}-c1").find_element(By.CSS_SELECTOR, ".received-note").text == (
            "Answer taken · the run is settling step 1."
        )
        release.set()

        until(browser, lambda b: by_id(b, "status").text == "completed", "the status to follow the run, no reload")
        assert browser.find_elements(By.ID, "status-note") == []
        # settled by the run: no longer pending, listed among the answers, the result shown
        until(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, ".call"), "the settled call to leave the page")
        assert by_id(browser, "answer-c1").find_element(By.CSS_SELECTOR, ".tool").text == "lookup"
        assert by_id(browser, "output").text == "found it"
    finally:
        release.set()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    browser.refresh()
    assert by_id(browser, "status").text == "completed" and browser.find_elements(By.CSS_SELECTOR, ".call") == []


class Ledger(BaseModel):
    refunded: list[int] = []


def ledger_refund(args: Refund, ctx: Any) -> dict[str, int]:
    ctx.update_state(lambda draft: draft.refunded.append(args.amount))
    return {"refunded": args.amount}


def sections(browser: Any) -> dict[str, str]:
    """The text of each section of the session page that the live stream keeps current."""
    return browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('[data-live]')].map((s) => [s.id, s.innerText]))"
    )


def test_in_a_browser_the_inbox_and_the_session_page_follow_a_call_and_its_answer_with_no_reload(executor, base, browser):
    agent_ = define_agent(unique("console-live"), tools=[define_tool("refund", "Refund.", Refund, ledger_refund,
                                                                     require_approval=True)], state_schema=Ledger)
    use_model(executor, calls(call("r1", "refund", {"amount": 7})), text("refunded 7"))
    browser.get(f"{base}/console/")
    inbox = browser.current_window_handle
    browser.execute_script("window.unreloaded = true")  # a reload would forget it

    # the inbox shows a new call as it is asked for, and keeps what is typed while it changes
    first = executor.execute(agent_, "refund please")
    sid = first.session_id
    until(browser, lambda b: b.find_elements(By.ID, f"call-{sid}-r1"), "the new call in the inbox")
    by_id(browser, f"call-{sid}-r1").find_element(By.NAME, "reason").send_keys("checking")
    second = executor.execute(agent_, "another refund please")
    until(browser, lambda b: b.find_elements(By.ID, f"call-{second.session_id}-r1"), "the second call in the inbox")
    assert by_id(browser, f"call-{sid}-r1").find_element(By.NAME, "reason").get_attribute("value") == "checking"

    browser.switch_to.new_window("tab")
    browser.get(f"{base}/console/sessions/{sid}")
    browser.execute_script("window.unreloaded = true")
    before = sections(browser)
    assert by_id(browser, "status").text == "awaiting_approval"
    assert [b.text for b in by_id(browser, "live-controls").find_elements(By.TAG_NAME, "button")] == ["Interrupt", "Abort"]
    assert "needs approval" in before["live-pending"] and before["live-answers"] == ""
    assert before["live-state"] == '{\n  "refunded": []\n}'
    assert "refund please" in before["live-transcript"] and "refunded 7" not in before["live-transcript"]
    assert "PENDING" in before["live-runs"] and before["live-result"] == ""

    # another operator answers: nothing here is clicked or reloaded
    executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="r1", approved=True, approver="cy"))
    assert first.result(timeout=RESULT_TIMEOUT).status == "completed"
    until(browser, lambda b: "SUCCESS" in sections(b)["live-runs"], "the run's workflow to end on the page")
    after = sections(browser)
    assert by_id(browser, "status").text == "completed"
    detail = admin.show_session(executor.database_url, sid)
    counts = dict(zip(*[iter(after["live-counts"].split("\n"))] * 2))
    assert counts["steps"] == str(detail.session.step_count) != "0"
    assert counts["LLM calls"] == str(detail.usage.llm_calls) == "2" and counts["tool calls"] == "1"
    assert by_id(browser, "live-controls").find_elements(By.TAG_NAME, "button") == []
    assert after["live-pending"] == "" and browser.find_elements(By.CSS_SELECTOR, ".call") == []
    assert by_id(browser, "answer-r1").find_element(By.CSS_SELECTOR, ".tool").text == "refund"
    assert "approved by cy" in after["live-answers"]
    assert after["live-state"] == '{\n  "refunded": [\n    7\n  ]\n}'
    assert "→ refund(" in after["live-transcript"] and "refunded 7" in after["live-transcript"]
    assert "completed" in after["live-runs"] and "active" not in after["live-runs"]
    assert by_id(browser, "output").text == "refunded 7"
    assert browser.execute_script("return window.unreloaded") is True

    # and the inbox, in its own tab, dropped the answered call and kept the other
    browser.switch_to.window(inbox)
    until(browser, lambda b: not b.find_elements(By.ID, f"call-{sid}-r1"), "the answered call to leave the inbox")
    assert by_id(browser, f"call-{second.session_id}-r1")
    assert browser.execute_script("return window.unreloaded") is True
    executor.submit_tool_result(second.session_id, ApprovalResponse(tool_call_id="r1", approved=False))
    assert second.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_in_a_browser_a_run_adopted_from_a_dead_worker_says_so_as_it_happens(executor, base, browser):
    """The adoption row a live process writes when it adopts a dead worker's run (see
    tests/workers/test_adoption.py for the real thing) shows in the runs table, with no reload."""
    sid, handle = waiting_refund(executor)
    browser.get(f"{base}/console/sessions/{sid}")
    browser.execute_script("window.unreloaded = true")
    assert browser.find_elements(By.CSS_SELECTOR, ".adopted") == []
    with executor.pool.connection() as conn:
        conn.execute("INSERT INTO helix.run_adoptions (session_num, run, from_executor, from_status, adopted_by)"
                     " VALUES (helix.session_num(%(s)s), 1, 'w-gone', 'dead', 'w-alive')", {"s": sid})
    until(browser, lambda b: b.find_elements(By.ID, "adopted-1-1"), "the adoption on the page")
    assert re.fullmatch(r"adopted by w-alive at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d after worker w-gone died",
                        by_id(browser, "adopted-1-1").text)
    assert browser.execute_script("return window.unreloaded") is True
    shown = admin.show_session(executor.database_url, sid).runs[0].adoptions
    assert by_id(browser, "adopted-1-1").text == shown[0].summary()
    executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="r1", approved=False))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_in_a_browser_the_session_page_shows_who_answered_when_and_why_as_show_does(executor, base, browser):
    agent_ = define_agent(unique("console-answers"), tools=[refund_tool()])
    use_model(executor, calls(call("r1", "refund", {"amount": 7}), call("r2", "refund", {"amount": 900})), text("ok"))
    handle = executor.execute(agent_, "two refunds")
    sid = handle.session_id
    wait_for(lambda: len(executor.list_pending(sid)) == 2, what="both approval requests")
    browser.get(f"{base}/console/sessions/{sid}")
    by_id(browser, f"call-{sid}-r1").find_element(By.CSS_SELECTOR, "button.approve").click()
    until(browser, lambda b: f"Approved r1 of session {sid}." in b.page_source, "the first flash")
    approved = by_id(browser, f"call-{sid}-r1")
    assert approved.find_element(By.CSS_SELECTOR, ".answer").text.startswith("approved by bea at ")
    assert approved.find_element(By.CSS_SELECTOR, ".received-note").text == (
        "Answer received · the run takes it once the other call of step 1 is answered."
    )
    assert browser.find_elements(By.ID, "status-note") == []  # awaiting_approval is true: r2 waits
    assert by_id(browser, "answer-r1")  # listed among the answers while the run waits for r2
    denied = by_id(browser, f"call-{sid}-r2")
    denied.find_element(By.NAME, "reason").send_keys("too <b>much</b>")
    denied.find_element(By.CSS_SELECTOR, "button.deny").click()
    until(browser, lambda b: f"Denied r2 of session {sid}." in b.page_source, "the second flash")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    browser.refresh()
    shown = admin.show_session(executor.database_url, sid).answers  # what `helix-dbos show` prints
    assert [a.tool_call_id for a in shown] == ["r1", "r2"]
    for answer, word in zip(shown, ["approved", "denied"]):
        row = by_id(browser, f"answer-{answer.tool_call_id}")
        assert row.find_element(By.CSS_SELECTOR, ".pill").text == word
        assert row.find_element(By.CSS_SELECTOR, ".by").text == answer.answered_by == "bea"
        assert row.find_element(By.CSS_SELECTOR, ".at").text == answer.answered_at.strftime("%Y-%m-%d %H:%M:%S")
        assert "refund" in row.text
    why = by_id(browser, "answer-r2").find_element(By.CSS_SELECTOR, ".why")
    assert why.text == "too <b>much</b>" == shown[1].reason
    assert why.find_elements(By.XPATH, "./*") == []  # the reason is text, not markup


def test_in_a_browser_the_live_tail_reads_as_log_lines(executor, base, browser):
    echo = define_tool("echo", "Echo.", Refund, lambda args, ctx: {"echoed": args.note})
    agent_ = define_agent(unique("console-tail"), tools=[echo])
    note = '<img src=x onerror="window.pwned = 1">'
    use_model(executor, calls(call("e1", "echo", {"amount": 1, "note": note})), text("all done"))
    handle = executor.execute(agent_, "echo it")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    browser.get(f"{base}/console/sessions/{handle.session_id}")
    until(browser, lambda b: any(line["type"] == "finish" for line in tail_lines(b)), "the run's end in the tail")
    lines = tail_lines(browser)
    assert [line["type"] for line in lines] == [
        "run_start", "step_start", "tool_call", "tool_result", "step_finish", "step_start", "text", "step_finish",
        "finish",
    ]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", line["at"]) and line["kind"] == line["type"] for line in lines)
    by_type = {line["type"]: line for line in lines}
    assert by_type["run_start"]["text"] == "run 1 (execute) input echo it"
    assert by_type["tool_call"]["where"] == "run 1 step 1"
    assert by_type["tool_call"]["text"].startswith('echo [e1] {"note":"<img src=x onerror=\\"window.pwned = 1\\">"')
    assert by_type["tool_result"]["text"].startswith("echo [e1]: ")
    assert by_type["text"]["text"] == "all done" and by_type["finish"]["text"] == "output all done"
    assert not any(line["text"].startswith("{") for line in lines)  # no raw JSON
    assert browser.find_elements(By.CSS_SELECTOR, "#tail img") == []
    assert browser.execute_script("return window.pwned") is None


@pytest.mark.parametrize(
    "output, shown",
    [
        ('<script>window.pwned = 1</script> "Paris"', '<script>window.pwned = 1</script> "Paris"'),
        ({"a": 1, "b": "<script>window.pwned = 1</script>"},
         '{\n  "a": 1,\n  "b": "<script>window.pwned = 1</script>"\n}'),
    ],
    ids=["text", "structured"],
)
def test_in_a_browser_a_run_s_output_shows_as_text_or_pretty_json_never_as_markup(
    executor, base, browser, output, shown
):
    class Out(BaseModel):
        a: int
        b: str

    if isinstance(output, str):
        agent_ = define_agent(unique("console-output"))
        use_model(executor, text(output))
    else:
        agent_ = define_agent(unique("console-output"), output_schema=Out)
        use_model(executor, finish("f1", **output))
    handle = executor.execute(agent_, "answer")
    assert handle.result(timeout=RESULT_TIMEOUT).output == output

    browser.get(f"{base}/console/sessions/{handle.session_id}")
    result = by_id(browser, "output")
    assert result.text == shown
    assert result.find_elements(By.XPATH, "./*") == []  # text only: no element inside
    assert browser.execute_script("return window.pwned") is None
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in browser.page_source


def test_the_console_pages_answer_while_every_thread_of_the_pool_is_held(executor):
    app = create_app(executor, authenticate=authenticate, authorize=operators)
    pool = FullThreadPool(app)
    serving = Serving(app)
    sid, handle = waiting_refund(executor, note="held")

    try:
        with pool.held(serving.url, {"X-User": "ana"}), httpx.Client(
            base_url=serving.url, headers={"X-User": "ana"}, timeout=RESULT_TIMEOUT
        ) as client:
            inbox = client.get("/console/")
            listed = client.get("/console/sessions", params={"status": "awaiting_approval"})
            page = client.get(f"/console/sessions/{sid}")
            missing = client.get(f"/console/sessions/{unique('nobody')}")
            form = {"csrf_token": token(page), "session_id": sid, "action": "interrupt"}
            interrupted = client.post("/console/control", data=form, follow_redirects=True)
    finally:
        serving.stop()
        executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="r1", approved=False))

    assert inbox.status_code == 200 and f'id="call-{sid}-r1"' in inbox.text
    assert listed.status_code == 200 and sid in listed.text
    assert page.status_code == 200 and "held" in page.text and "awaiting_approval" in page.text
    assert missing.status_code == 404
    assert interrupted.status_code == 200 and "Interrupt requested." in interrupted.text
    assert handle.result(timeout=RESULT_TIMEOUT).status == "interrupted"
