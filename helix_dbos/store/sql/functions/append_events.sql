-- Append evs ([{type, data, key}]) to the session's stream and bring sessions.event_seq
-- level; returns the new last seq. The caller holds the session row (FOR UPDATE or a prior
-- UPDATE in the same transaction).
CREATE OR REPLACE FUNCTION helix.append_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    snum bigint := helix.session_num(sid);
    last_seq bigint := helix.insert_events(snum, run_no, step_no, evs);
BEGIN
    UPDATE helix.sessions SET event_seq = last_seq WHERE num = snum;
    RETURN last_seq;
END;
$$;
