"""The app module ``helix-dbos serve`` loads in the server tests: DBOS on
``$HELIX_SERVER_APP_URL``, a mock model that answers "served by <pid>", and one agent,
``served-echo`` (other runs it is asked about belong to the test process).

    helix-dbos serve --app server_app:executor --allow-unauthenticated [--no-worker]
"""

from __future__ import annotations

import os

from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config, define_agent

URL = os.environ["HELIX_SERVER_APP_URL"]

DBOS(config=dbos_config(URL, name="helix-server-app", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(default_response={"content": f"served by {os.getpid()}"}),
                             database_url=URL)
executor.register(define_agent(name="served-echo", system_prompt="Say who serves you."))
