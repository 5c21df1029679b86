"""A screenshot of a session's trace in Arize Phoenix's web UI, for the docs.

    python scripts/trace_screenshot.py [--database-url URL] [--out docs/images/trace-phoenix.png]

On a database of its own (created on the server of --database-url, else the embedded
Postgres, and dropped at the end) it starts Arize Phoenix (``.helix/phoenix-venv``,
which scripts/test.sh installs) and a real ``helix-dbos worker`` on the tracing test's
app (tests/observability/obs_app.py) that exports its spans to Phoenix over OTLP/HTTP.
It runs one session of three runs: a step with two parallel tool calls, a tool call
that waits for approval (approved after a moment) and a sub-agent call; then opens the
session's trace in headless Chromium, selects the first run and saves the page: the
trace tree with every span's name on the left, the run span's attributes on the right.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "observability"))

from bench import create_bench_database, drop_database  # noqa: E402
from obs_kit import free_port, until, worker  # noqa: E402

from helix_dbos import admin  # noqa: E402
from helix_dbos._client.queues import RunEnqueuer  # noqa: E402
from helix_dbos._database import resolve_database_url  # noqa: E402
from helix_dbos.errors import SessionNotFoundError  # noqa: E402
from helix_dbos.observability import session_span_context  # noqa: E402
from helix_dbos._store.migrations import migrate  # noqa: E402

PHOENIX = ROOT / ".helix" / "phoenix-venv" / "bin" / "phoenix"
SESSION = "support-7f3a"


def start_phoenix(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    """``phoenix serve`` on free ports, its data in ``workdir``; the process and its base URL."""
    if not PHOENIX.exists():
        raise SystemExit(f"Arize Phoenix is not installed at {PHOENIX}: run ./scripts/test.sh --co -q (it installs it)")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": workdir, "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_HOST": "127.0.0.1"}
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    until(healthy, "Phoenix to start", timeout=120, every=0.5)
    return proc, base


def completed(url: str, run: int) -> bool:
    """Whether the session's latest run is ``run`` and it completed."""
    try:
        current = admin.get_current_run(url, SESSION)
    except SessionNotFoundError:
        return False  # its first run has not begun
    return current is not None and current.run == run and current.status == "completed"


def run_session(url: str, phoenix: str) -> None:
    """The session's three runs on a real worker exporting to ``phoenix``."""
    proc = worker(url, env={"HELIX_OBS_OTLP": f"{phoenix}/v1/traces"})
    try:
        with RunEnqueuer(url, queue="agents") as enqueuer:
            for run, word in enumerate(("tools", "approve", "delegate"), start=1):
                enqueuer.enqueue("obs-assistant", word, session_id=SESSION)
                if word == "approve":
                    [call] = until(lambda: admin.list_pending(url, SESSION), "the approval request")
                    time.sleep(1.0)  # a wait the trace shows
                    admin.approve(url, SESSION, call.tool_call_id)
                until(lambda: completed(url, run), f"run {word!r} to complete")
    finally:
        proc.stop()


def shoot(phoenix: str, trace_id: str, out: Path, size: str) -> None:
    """Open the trace in Phoenix (its ``/redirects/traces/<id>`` route) and save a PNG."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={size}",
                     "--hide-scrollbars"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        browser.get(f"{phoenix}/redirects/traces/{trace_id}")
        WebDriverWait(browser, 60).until(
            expected_conditions.presence_of_element_located((By.XPATH, "//*[text()='invoke_agent obs-researcher']")))
        # Select the first run (the trace opens on the last), so the tree shows from its top.
        first = browser.find_element(
            By.XPATH, "(//*[contains(@class, 'span-node__heading')][.//*[text()='invoke_agent obs-assistant']])[1]")
        browser.execute_script("arguments[0].scrollIntoView(); arguments[0].click();", first)
        time.sleep(2.0)  # the span details panel fills in
        out.parent.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(out))
    finally:
        browser.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "trace-phoenix.png")
    parser.add_argument("--window-size", default="1400,2000", help="tall enough for the whole tree")
    args = parser.parse_args()
    server_url = resolve_database_url(args.database_url)
    url, name = create_bench_database(server_url)
    with tempfile.TemporaryDirectory(prefix="phoenix-") as workdir:
        phoenix_proc, phoenix = start_phoenix(workdir)
        try:
            migrate(url)
            run_session(url, phoenix)
            trace_id = format(session_span_context(SESSION).trace_id, "032x")
            spans_url = f"{phoenix}/v1/projects/default/spans"
            until(lambda: sum(s["context"]["trace_id"] == trace_id
                              for s in httpx.get(spans_url, params={"limit": 1000}, timeout=30).json()["data"]) >= 20,
                  "the session's spans in Phoenix", timeout=60)
            shoot(phoenix, trace_id, args.out, args.window_size)
            print(f"saved {args.out} (trace {trace_id})")
        finally:
            phoenix_proc.terminate()
            phoenix_proc.wait(30)
            drop_database(server_url, name)


if __name__ == "__main__":
    main()
