-- helix.transcript is a view of helix.step_messages with each row's messages whole (019).
-- A worker of the release before still inserts into helix.transcript while a rolling
-- deploy runs (its fork); this stores the row as it comes.
CREATE OR REPLACE FUNCTION helix.insert_transcript_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO helix.step_messages (session_num, first_seq, run, step, messages)
    VALUES (NEW.session_num, NEW.first_seq, NEW.run, NEW.step, NEW.messages);
    RETURN NEW;
END;
$$;
