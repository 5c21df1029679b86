-- The last seq of the session's stream (0 when it has none): one step back along
-- stream_pkey. snum is the session's number (helix.sessions.num, 016). plpgsql, not sql: a
-- SQL function with a subquery is not inlined, and is planned again by every statement
-- that calls it (see unwritten_events).
CREATE OR REPLACE FUNCTION helix.last_event_seq(snum bigint) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN COALESCE((SELECT seq FROM helix.stream WHERE session_num = snum ORDER BY seq DESC LIMIT 1), 0);
END;
$$;
