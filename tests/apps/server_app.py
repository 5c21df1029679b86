"""The app module ``helix-dbos serve`` loads in the server tests: DBOS on
``$HELIX_SERVER_APP_URL``, a mock model that answers "served by <pid>", and one agent,
``served-echo`` (other runs it is asked about belong to the test process).

    helix-dbos serve --app server_app:executor --allow-unauthenticated [--no-worker]
    helix-dbos serve --app server_app:executor --auth server_app:authenticate --authorize server_app:authorize
"""

from __future__ import annotations

import os
from typing import Any

from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, SessionRecord, dbos_config, define_agent
from helix_dbos.server import Action, owns

URL = os.environ["HELIX_SERVER_APP_URL"]

DBOS(config=dbos_config(URL, name="helix-server-app", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(default_response={"content": f"served by {os.getpid()}"}),
                             database_url=URL)
executor.register(define_agent(name="served-echo", system_prompt="Say who serves you."))


def authenticate(request: Any) -> str | None:
    """``--auth server_app:authenticate``: the principal is the ``X-User`` header."""
    return request.headers.get("x-user") or None


def authorize(principal: Any, action: Action, session: SessionRecord | None) -> bool:
    """``--authorize server_app:authorize``: ``ops`` may do anything, others act on their own."""
    return principal == "ops" or owns(principal, action, session)
