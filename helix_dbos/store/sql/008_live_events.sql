-- Live events (issue 15): a step's events are written when they happen, not only at its
-- commit, still exactly once and gap-free per session (see docs/architecture.md, "The
-- durable event stream").
--
-- Events a step writes carry a key, unique in their session: '<run>.<step>.<part>', e.g.
-- '1.2.step_start', '1.2.call:t1', '1.2.result:t1'. Workflow code writes each event as soon
-- as its source is checkpointed (helix.append_events_once, a plain autocommit statement),
-- so a replay after a crash derives the same events with the same keys and writes
-- nothing. The commit (helix.commit_step, still one transaction) gets all the step's keyed
-- events and writes only those no earlier write put in the stream. Seqs are assigned
-- under the session row's lock in the inserting transaction, so the stream stays 1..N
-- without gaps, in commit order. Events written otherwise (run_start, approval requests,
-- interrupted, aborted, a hook save's state_patch) have no key: each comes from one
-- checkpointed transaction.
ALTER TABLE helix.events ADD COLUMN key text;
CREATE UNIQUE INDEX events_key_idx ON helix.events (session_id, key) WHERE key IS NOT NULL;

CREATE TRIGGER events_relay_to_parent AFTER INSERT ON helix.events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION helix.relay_child_events();
