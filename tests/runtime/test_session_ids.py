"""A session started or forked without an id gets a time-ordered one (helix_dbos/_ids.py):
a version-7 UUID, so a later session's rows go after an earlier one's in every index keyed
by session id."""

from __future__ import annotations

import uuid

from runtime_testkit import RESULT_TIMEOUT, text, unique, use_model

from helix_dbos import define_agent
from helix_dbos._client import commands


def test_sessions_started_or_forked_without_an_id_get_time_ordered_ones(executor):
    use_model(executor, text("one"), text("two"))
    agent = define_agent(unique("ids"))
    first = executor.execute(agent, "a")
    assert first.result(timeout=RESULT_TIMEOUT).status == "completed"
    second = executor.execute(agent, "b")
    assert second.result(timeout=RESULT_TIMEOUT).status == "completed"
    forked = commands.fork(executor.pool, first.session_id, 1)

    assert [uuid.UUID(sid).version for sid in (first.session_id, second.session_id, forked.session_id)] == [7, 7, 7]
    assert first.session_id < second.session_id < forked.session_id
