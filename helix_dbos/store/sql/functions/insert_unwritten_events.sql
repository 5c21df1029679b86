-- Lock the session row and append the keyed events of evs not in the stream yet; returns
-- how many it wrote. sessions.event_seq is left as it was: the step's commit, which
-- follows, brings it level (013).
CREATE OR REPLACE FUNCTION helix.insert_unwritten_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    fresh jsonb;
BEGIN
    PERFORM 1 FROM helix.sessions WHERE id = sid FOR UPDATE;
    fresh := helix.unwritten_events(sid, step_no, evs);
    IF jsonb_array_length(fresh) > 0 THEN
        PERFORM helix.insert_events(sid, run_no, step_no, fresh);
    END IF;
    RETURN jsonb_array_length(fresh);
END;
$$;
