"""examples/chat as a person uses it: ``examples/chat/run.sh`` (npm ci, esbuild, uvicorn)
on a fresh database, and a real headless Chromium on its React page (the AI SDK's
useChat): a question, a click on Approve, the answer streamed back. And as its operator
stops it: Ctrl-C or SIGTERM while a chat waits for approval, then the app started again."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from serving import wait_until_served

from helix_dbos._database import libpq_url

RUN = Path(__file__).resolve().parents[2] / "examples" / "chat" / "run.sh"
ANSWER = "Order A-42 is refunded: 20 EUR are on their way back to your card."


def serve_example(url: str) -> tuple[subprocess.Popen[str], str]:
    """``examples/chat/run.sh`` on ``url`` and a free port, once it serves: the process
    (uvicorn, which the script becomes, in a process group of its own) and its base URL.
    Tests on other xdist workers wait for it: the script installs and builds the page in
    place, and two at once would see each other's half-made ``node_modules``."""
    port = free_port()
    env = {**os.environ, "HELIX_DATABASE_URL": url, "PORT": str(port)}
    env.pop("HELIX_EXAMPLE_MODEL", None)
    base = f"http://127.0.0.1:{port}"
    with open(Path(tempfile.gettempdir()) / "helix-chat-example-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen([str(RUN)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            wait_until_served(f"{base}/assets/app.js", proc, timeout=180)  # the first run installs the npm packages
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    return proc, base


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def example(make_database: Callable[[], str]) -> Iterator[str]:
    proc, base = serve_example(make_database())
    try:
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_a_person_asks_approves_and_reads_the_streamed_answer(example):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from chromium import headless_chromium

    browser = headless_chromium()
    try:
        browser.get(f"{example}/#chat-{os.getpid()}")
        WebDriverWait(browser, 15).until(lambda b: b.find_elements(By.ID, "input"))[0].send_keys("Please refund order A-42")
        browser.find_element(By.ID, "send").click()
        approve = WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "button.approve"))
        assert browser.find_element(By.CSS_SELECTOR, ".tool-state").text == "waiting for your approval"
        assert browser.find_element(By.CSS_SELECTOR, ".tool-input").text == "amount 20, order id A-42"
        approve[0].click()
        WebDriverWait(browser, 30).until(
            lambda b: any(p.text == ANSWER for p in b.find_elements(By.CSS_SELECTOR, ".message.assistant .text"))
        )
        assert browser.find_element(By.CSS_SELECTOR, ".tool-state").text == "done"
        assert browser.find_element(By.CSS_SELECTOR, ".tool-output").text == "refunded 20, order id A-42"
        assert "state: refunded A-42" in browser.find_element(By.CSS_SELECTOR, ".message.assistant").text
        assert "{" not in browser.find_element(By.CSS_SELECTOR, ".message.assistant").text  # no raw JSON
        assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".message.user")] == ["Please refund order A-42"]
    finally:
        browser.quit()


def test_a_first_visit_without_a_hash_keeps_its_chat_across_a_reload(example):
    """The page names a new chat in the URL's hash; a reload of that URL shows the same
    chat (the one the server keeps under that id), and it can still be answered."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from chromium import headless_chromium

    browser = headless_chromium()
    try:
        browser.get(f"{example}/")
        WebDriverWait(browser, 15).until(lambda b: b.find_elements(By.ID, "input"))[0].send_keys("Please refund order A-42")
        browser.find_element(By.ID, "send").click()
        WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, "button.approve"))
        chat_id = browser.execute_script("return location.hash").removeprefix("#")
        status = httpx.get(f"{example}/agents/status", params={"session_id": chat_id}, timeout=30)
        assert status.status_code == 200 and status.json()["status"] == "awaiting_approval", status.text

        browser.refresh()
        WebDriverWait(browser, 15).until(lambda b: b.find_elements(By.CSS_SELECTOR, "button.approve"))
        assert browser.execute_script("return location.hash") == f"#{chat_id}"
        assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".message.user")] == ["Please refund order A-42"]
        assert browser.find_element(By.CSS_SELECTOR, ".tool-state").text == "waiting for your approval"
        # the page may render the restored chat twice (the saved messages, then the resume): click the button it shows
        WebDriverWait(browser, 15, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda b: b.find_element(By.CSS_SELECTOR, "button.approve").click() or True
        )
        WebDriverWait(browser, 30).until(
            lambda b: any(p.text == ANSWER for p in b.find_elements(By.CSS_SELECTOR, ".message.assistant .text"))
        )
        assert httpx.get(f"{example}/agents/status", params={"session_id": chat_id}, timeout=30).json()["output"] == ANSWER
    finally:
        browser.quit()


def query(url: str, sql: str, *args: object) -> object:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_app_while_a_chat_waits_hands_it_back_and_releases_the_lease(make_database, how):
    url = make_database()
    chat_id = f"stop-{how.name}"
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Please refund order A-42"}]}
    first, base = serve_example(url)
    try:
        with httpx.stream("POST", f"{base}/agents/chat", json={"id": chat_id, "messages": [message]}, timeout=60) as chat:
            assert '"finishReason":"tool-calls"' in chat.read().decode()  # paused: the refund waits for approval
        executor_id = query(url, "SELECT executor_id FROM helix.workers WHERE pid = %s", first.pid)
        first.send_signal(how)
        output, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()

    assert first.returncode in (0, -how), (first.returncode, output)
    assert "Application shutdown complete." in output and "Traceback" not in output, output
    assert query(url, "SELECT state FROM helix.workers WHERE executor_id = %s", executor_id) == "released"

    second, base = serve_example(url)
    try:
        status = httpx.get(f"{base}/agents/status", params={"session_id": chat_id}, timeout=30).json()
        call_id = status["pending"][0]["tool_call_id"]
        approved = httpx.post(f"{base}/agents/chat/{chat_id}/submit-tool-result",
                              json={"tool_call_id": call_id, "approved": True}, timeout=30)
        assert approved.status_code == 200, approved.text
        deadline = time.monotonic() + 60
        while (status := httpx.get(f"{base}/agents/status", params={"session_id": chat_id}).json())["status"] != "completed":
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["output"] == ANSWER
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=60)
