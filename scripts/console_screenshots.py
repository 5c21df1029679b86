"""Screenshots of the operator console for the README, taken with headless Chromium.

    python scripts/console_screenshots.py [--database-url URL] [--out docs/images]

On a database of its own (created on the server of --database-url, else the embedded
Postgres, and dropped at the end) it runs the demo researcher to the end, leaves a refund
waiting for approval and a client tool waiting for its result, serves the console, and
saves ``console-inbox.png`` and ``console-session.png``; then approves the refund and saves
``console-answers.png``, the support session's page with the approval received.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import uvicorn
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helix_dbos import ApprovalResponse, MockLLMAdapter, define_agent, define_tool, launch_standalone, shutdown  # noqa: E402
from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402
from helix_dbos.demo import research_agent, scripted_research  # noqa: E402
from helix_dbos.server import create_app  # noqa: E402
from helix_dbos.types import Message, ToolCallsStepResult, ToolSpec  # noqa: E402


class Refund(BaseModel):
    order: str
    amount_eur: int
    reason: str


class Address(BaseModel):
    street: str
    city: str


refund = define_tool("refund", "Refund an order.", Refund, lambda args, ctx: {"refunded": args.amount_eur},
                     require_approval=True, approval_timeout=86_400)
confirm_address = define_tool("confirm_address", "Ask the customer to confirm the address.", Address, "client",
                              output_schema=Address)
support = define_agent(name="support", system_prompt="You help customers.", tools=[refund, confirm_address])
researcher = research_agent()


def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
    if any(t.name == "refund" for t in tools):
        return ToolCallsStepResult(tool_calls=[
            {"id": "call_refund_1", "name": "refund",
             "arguments": {"order": "A-1042", "amount_eur": 129, "reason": "arrived broken"}},
            {"id": "call_addr_1", "name": "confirm_address", "arguments": {"street": "1 Rue de Rivoli", "city": "Paris"}},
        ])
    return scripted_research(messages, tools)


def shoot(url: str, pages: dict[str, Path]) -> None:
    """Save a screenshot of each console page (a path under ``url``) to its file."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1100",
                     "--hide-scrollbars"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        for page, file in pages.items():
            browser.get(f"{url}{page}")
            time.sleep(1.5)  # the live tail fills over SSE
            browser.save_screenshot(str(file))
    finally:
        browser.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    server = resolve_database_url(args.database_url, allow_embedded=True)
    name = f"helix_screens_{os.getpid()}"
    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        executor = launch_standalone(MockLLMAdapter(respond), agents=[support, researcher],
                                     database_url=render_url(server, database=name), name="helix-screens")
        done = executor.execute(researcher, "Why do agent runs on DBOS survive crashes?", session_id="research-7")
        done.result(timeout=60)
        waiting = executor.execute(support, "My order A-1042 arrived broken.", session_id="support-1042")
        while len(executor.list_pending(waiting.session_id)) < 2:
            time.sleep(0.1)
        serving = uvicorn.Server(uvicorn.Config(create_app(executor, authenticate=lambda request: "ana"),
                                                host="127.0.0.1", port=0, log_level="warning"))
        threading.Thread(target=serving.run, daemon=True).start()
        while not serving.started:
            time.sleep(0.05)
        port = serving.servers[0].sockets[0].getsockname()[1]
        args.out.mkdir(parents=True, exist_ok=True)
        url = f"http://127.0.0.1:{port}"
        shoot(url, {"/console/": args.out / "console-inbox.png", "/console/sessions/research-7": args.out / "console-session.png"})
        executor.submit_tool_result(waiting.session_id, ApprovalResponse(
            tool_call_id="call_refund_1", approved=True, reason="photo of the damage attached", approver="ana"))
        shoot(url, {"/console/sessions/support-1042": args.out / "console-answers.png"})
        serving.should_exit = True
        executor.abort(waiting.session_id, "screenshots taken")
        shutdown()
    finally:
        with psycopg.connect(libpq_url(server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"saved console-inbox.png, console-session.png and console-answers.png in {args.out}")


if __name__ == "__main__":
    main()
