"""examples/chat as a person uses it: ``examples/chat/run.sh`` (npm ci, esbuild, uvicorn)
on a fresh database, and a real headless Chromium on its React page (the AI SDK's
useChat): a question, a click on Approve, the answer streamed back."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from serving import wait_until_served

RUN = Path(__file__).resolve().parents[2] / "examples" / "chat" / "run.sh"
ANSWER = "Order A-42 is refunded: 20 EUR are on their way back to your card."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def example(make_database: Callable[[], str]) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "HELIX_DATABASE_URL": make_database(), "PORT": str(port)}
    env.pop("HELIX_EXAMPLE_MODEL", None)
    proc = subprocess.Popen([str(RUN)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(f"{base}/assets/app.js", proc, timeout=180)  # the first run installs the npm packages
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


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
        approve[0].click()
        WebDriverWait(browser, 30).until(
            lambda b: any(p.text == ANSWER for p in b.find_elements(By.CSS_SELECTOR, ".message.assistant .text"))
        )
        assert browser.find_element(By.CSS_SELECTOR, ".tool-state").text == "output-available"
        assert 'state: {"refunded":["A-42"]}' in browser.find_element(By.CSS_SELECTOR, ".message.assistant").text
        assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".message.user")] == ["Please refund order A-42"]
    finally:
        browser.quit()
