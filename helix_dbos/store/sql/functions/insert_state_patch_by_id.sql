-- helix.state_patches is a view of the state log, which names sessions by number (017)
-- and is stored in helix.step_patches (020). A worker of an earlier release still inserts
-- into helix.state_patches by session id while a rolling deploy runs (its hook state save
-- and fork); this puts each row in the log under the session's number.
CREATE OR REPLACE FUNCTION helix.insert_state_patch_by_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.step_patches (session_num, step, part, run, patch, created_at)
    VALUES (helix.session_num(NEW.session_id), NEW.step, COALESCE(NEW.part, 0), NEW.run, NEW.patch,
            COALESCE(NEW.created_at, now()));
    RETURN NEW;
END;
$$;
