-- The data of the event under key k of step step_no of session snum, which must be in
-- the stream: what helix.expand_messages reads a message's part back from (019).
CREATE OR REPLACE FUNCTION helix.step_event(snum bigint, step_no integer, k text)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    ev jsonb;
BEGIN
    SELECT data INTO ev FROM helix.stream WHERE session_num = snum AND step = step_no AND key = k;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: the transcript of session number % reads event % of step %, which the stream does not hold',
            snum, k, step_no USING ERRCODE = 'data_corrupted';
    END IF;
    RETURN ev;
END;
$$;
