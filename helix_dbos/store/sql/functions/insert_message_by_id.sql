-- helix.messages is a view of helix.transcript, which names sessions by number (017). A
-- worker of an earlier release still inserts into helix.messages by session id while a
-- rolling deploy runs (its append_messages and fork); this puts each row in the
-- transcript under the session's number.
CREATE OR REPLACE FUNCTION helix.insert_message_by_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.transcript (session_num, seq, run, step, message)
    SELECT s.num, NEW.seq, NEW.run, NEW.step, NEW.message FROM helix.sessions s WHERE s.id = NEW.session_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', NEW.session_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END;
$$;
