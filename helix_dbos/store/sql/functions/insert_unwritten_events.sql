-- Append the keyed events of evs not in the stream of session number snum yet; returns
-- how many it wrote. The caller holds the session row. sessions.event_seq is left as it
-- was: the step's commit, which follows, brings it level (013).
CREATE OR REPLACE FUNCTION helix.insert_unwritten_events(snum bigint, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    fresh jsonb := helix.unwritten_events(snum, step_no, evs);
BEGIN
    IF jsonb_array_length(fresh) > 0 THEN
        PERFORM helix.insert_events(snum, run_no, step_no, fresh);
    END IF;
    RETURN jsonb_array_length(fresh);
END;
$$;
