-- Event keys are indexed in the order they are written (issue 19): events_key_idx was
-- (session_id, key), and keys '<run>.<step>.<part>' sort as text, so from step 10 on a
-- session's new keys went between its older ones ('1.10.' sorts before '1.2.'), into
-- full pages that split in half: the index stayed about half empty. Every keyed event is
-- written at the step its key names, and a step's events at the end of the session's
-- (session_id, step) range, so (session_id, step, key) fills its pages. Each lookup by
-- key (helix.unwritten_events, helix.commit_step) now names the step as well.
--
-- Building the index reads helix.events once, under a lock that holds writes of events
-- back until it is built: on a large stream, migrate at a quiet time.
CREATE UNIQUE INDEX events_step_key_idx ON helix.events (session_id, step, key) WHERE key IS NOT NULL;
DROP INDEX helix.events_key_idx;
DROP FUNCTION IF EXISTS helix.unwritten_events(text, jsonb);
--
-- The functions this version changed are in functions/, each as it is now: migrate
-- applies a function's file whenever it changed (helix_dbos/store/migrations.py).
