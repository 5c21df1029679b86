-- A non-blocking companion's run ended (completed or failed): notice its parent, in the
-- transaction that ended it, once.
CREATE OR REPLACE FUNCTION helix.notice_companion_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.companion_notices (session_id, child_session_id, run, name, status, output, error)
    SELECT c.session_id, NEW.session_id, NEW.run, c.name, NEW.status, s.output, NEW.error
      FROM helix.companions c JOIN helix.sessions s ON s.id = NEW.session_id
     WHERE c.child_session_id = NEW.session_id AND c.mode = 'non-blocking'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
