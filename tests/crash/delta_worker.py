"""A worker process for the mid-stream crash test: one session of an agent whose model
streams a long answer slowly.

    python delta_worker.py URL SESSION_ID EXECUTOR_ID start|recover

``start`` begins the run; ``recover`` only launches DBOS, which recovers the run the
killed worker left PENDING, and waits for it. The model (a responder, so a relaunched
process answers the same) streams ``ANSWER`` four characters every 20 ms as text deltas.
The result is printed as one JSON line.
"""

from __future__ import annotations

import json
import sys

from helix_dbos import MockLLMAdapter, define_agent, launch_standalone, shutdown
from helix_dbos.types import Message, TextStepResult, ToolSpec

ANSWER = "The quick brown fox jumps over the lazy dog, " * 4


def respond(messages: list[Message], tools: list[ToolSpec]) -> TextStepResult:
    return TextStepResult(content=ANSWER)


agent = define_agent(name="stream-agent", system_prompt="Say something long.")


def main() -> None:
    url, session_id, executor_id, mode = sys.argv[1:5]
    model = MockLLMAdapter(responder=respond, stream_chunk_chars=4, delta_delay_seconds=0.02)
    executor = launch_standalone(
        model, agents=[agent], database_url=url, executor_id=executor_id,
        notification_listener_polling_interval_sec=0.01, log_level="INFO",
    )
    handle = executor.execute(agent, "go", session_id=session_id) if mode == "start" else executor.handle(session_id)
    result = handle.result(timeout=120)
    print(json.dumps(result.model_dump(mode="json")), flush=True)
    shutdown()


if __name__ == "__main__":
    main()
