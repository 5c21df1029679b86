-- helix-dbos: each session belongs to someone.
--
-- sessions.owner is who a session belongs to: the principal the agent server (or code,
-- with execute(..., owner=...)) created it for; NULL for a session created without one.
-- A sub-agent's or companion's session takes its root's owner when it is created, and a
-- fork its source's (_store/writes.py), so one owner holds a whole tree. The agent server
-- lists a principal's sessions with
--     SELECT ... FROM helix.sessions WHERE owner = 'u-42' ORDER BY updated_at DESC LIMIT 50;
-- which sessions_owner_idx answers without reading anyone else's rows.
ALTER TABLE helix.sessions ADD COLUMN owner text;
CREATE INDEX sessions_owner_idx ON helix.sessions (owner, updated_at DESC) WHERE owner IS NOT NULL;
