-- helix.messages is a view of the transcript, which names sessions by number (017) and is
-- stored in helix.step_messages (019). A worker of an earlier release still inserts into
-- helix.messages by session id while a rolling deploy runs (its append_messages and
-- fork); this puts each row in the transcript under the session's number, as a step of
-- one message.
CREATE OR REPLACE FUNCTION helix.insert_message_by_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.step_messages (session_num, first_seq, run, step, messages)
    VALUES (helix.session_num(NEW.session_id), NEW.seq, NEW.run, NEW.step, jsonb_build_array(NEW.message));
    RETURN NEW;
END;
$$;
