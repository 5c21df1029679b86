-- helix.state_log is a view of helix.step_patches and the stream's patch events (020). A
-- worker of the release before still inserts into helix.state_log while a rolling deploy
-- runs (its hook state save and fork); this stores the row as it comes.
CREATE OR REPLACE FUNCTION helix.insert_step_patch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.step_patches (session_num, step, part, run, patch, created_at)
    VALUES (NEW.session_num, NEW.step, COALESCE(NEW.part, 0), NEW.run, NEW.patch, COALESCE(NEW.created_at, now()));
    RETURN NEW;
END;
$$;
