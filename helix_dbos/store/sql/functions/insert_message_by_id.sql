-- helix.messages is a view of helix.transcript, which names sessions by number (017). A
-- worker of an earlier release still inserts into helix.messages by session id while a
-- rolling deploy runs (its append_messages and fork); this puts each row in the
-- transcript under the session's number, as a step of one message.
CREATE OR REPLACE FUNCTION helix.insert_message_by_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.transcript (session_num, first_seq, run, step, messages)
    VALUES (helix.session_num(NEW.session_id), NEW.seq, NEW.run, NEW.step, jsonb_build_array(NEW.message));
    RETURN NEW;
END;
$$;
