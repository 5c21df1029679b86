-- Append evs ([{type, data, key}]) after the stream's last event; returns the new last
-- seq. snum is the session's number (016); the caller holds the session row.
CREATE OR REPLACE FUNCTION helix.insert_events(snum bigint, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint := helix.last_event_seq(snum);
BEGIN
    INSERT INTO helix.stream (session_num, seq, run, step, type, data, key)
    SELECT snum, last_seq + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);
    RETURN last_seq + COALESCE(jsonb_array_length(evs), 0);
END;
$$;
