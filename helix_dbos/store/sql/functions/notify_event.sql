-- The durable stream wakes readers in any process: one NOTIFY per committing
-- transaction and session (Postgres folds identical payloads within a transaction).
-- A statement trigger: one call per INSERT, not one per event row.
CREATE OR REPLACE FUNCTION helix.notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('helix_events', s.session_id) FROM (SELECT DISTINCT session_id FROM new_rows) AS s;
    RETURN NULL;
END;
$$;
