"""The app module ``helix-dbos serve`` loads in the server tests: DBOS on
``$HELIX_SERVER_APP_URL``, a mock model, no agents of its own (the runs it is asked to
interrupt or abort belong to the test process).

    helix-dbos serve --app server_app:executor --allow-unauthenticated --no-worker
"""

from __future__ import annotations

import os

from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config

URL = os.environ["HELIX_SERVER_APP_URL"]

DBOS(config=dbos_config(URL, name="helix-server-app", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(), database_url=URL)
