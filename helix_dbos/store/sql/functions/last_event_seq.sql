-- The last seq of the session's stream (0 when it has none): one step back along
-- events_pkey.
CREATE OR REPLACE FUNCTION helix.last_event_seq(sid text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT seq FROM helix.events WHERE session_id = sid ORDER BY seq DESC LIMIT 1), 0);
$$;
