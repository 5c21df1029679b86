-- Append the keyed events of evs that are not in the session's stream yet and bring
-- sessions.event_seq level; returns how many it wrote. Workflow code calls it, a plain
-- autocommit statement, for a group of events as soon as their source is checkpointed
-- (008), so a replay that derives the same events with the same keys writes nothing.
CREATE OR REPLACE FUNCTION helix.append_events_once(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    snum bigint;
    n integer;
BEGIN
    snum := helix.session_num(sid);
    PERFORM 1 FROM helix.sessions WHERE num = snum FOR UPDATE;
    n := helix.insert_unwritten_events(snum, run_no, step_no, evs);
    IF n > 0 THEN
        UPDATE helix.sessions SET event_seq = helix.last_event_seq(snum) WHERE num = snum;
    END IF;
    RETURN n;
END;
$$;
