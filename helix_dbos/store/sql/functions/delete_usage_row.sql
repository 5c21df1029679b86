-- A worker of the release before 021 prunes with DELETE FROM helix.usage_log, now a view
-- (021): this deletes the row stored for it; usage read from a step_finish event goes
-- when prune deletes the session's stream.
CREATE OR REPLACE FUNCTION helix.delete_usage_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM helix.step_usage WHERE session_num = OLD.session_num AND id = OLD.id;
    RETURN OLD;
END;
$$;
