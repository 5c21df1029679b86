-- The last seq of the session's stream (0 when it has none): one step back along
-- events_pkey. plpgsql, not sql: a SQL function with a subquery is not inlined, and is
-- planned again by every statement that calls it (see unwritten_events).
CREATE OR REPLACE FUNCTION helix.last_event_seq(sid text) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN COALESCE((SELECT seq FROM helix.events WHERE session_id = sid ORDER BY seq DESC LIMIT 1), 0);
END;
$$;
