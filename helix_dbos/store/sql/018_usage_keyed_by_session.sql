-- helix.usage_log's rows are read and deleted by session (usage_summary, prune, the
-- session's foreign key), never by id alone: its primary key becomes (session_num, id),
-- and the index on (session_num, run, step) goes (issue 19). Each usage row had an entry
-- in both; on the peers' workload, built from the same rows, usage takes 492 -> 445 bytes
-- a turn. Ids stay as they were, and new ones still come from the identity.
ALTER TABLE helix.usage_log DROP CONSTRAINT usage_log_pkey, ADD PRIMARY KEY (session_num, id);
DROP INDEX helix.usage_log_session_idx;
