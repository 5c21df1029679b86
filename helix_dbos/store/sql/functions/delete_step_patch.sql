-- A worker of the release before 020 prunes with DELETE FROM helix.state_log, now a view
-- (020): this deletes the rows stored for that step; a patch read from the stream goes
-- when prune deletes the session's stream.
CREATE OR REPLACE FUNCTION helix.delete_step_patch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM helix.step_patches WHERE session_num = OLD.session_num AND step = OLD.step AND part = OLD.part;
    RETURN OLD;
END;
$$;
