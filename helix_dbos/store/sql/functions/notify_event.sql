-- The durable stream wakes readers in any process: one NOTIFY per committing
-- transaction and session (Postgres folds identical payloads within a transaction), its
-- payload the session's id. A statement trigger on helix.stream (016): one call per
-- INSERT, not one per event row.
CREATE OR REPLACE FUNCTION helix.notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('helix_events', s.id)
       FROM helix.sessions s WHERE s.num IN (SELECT DISTINCT session_num FROM new_rows);
    RETURN NULL;
END;
$$;
