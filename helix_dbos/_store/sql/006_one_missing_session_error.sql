-- One SQLSTATE for a missing session: every helix function that is given the id of a
-- session that does not exist raises no_data_found (P0002), as helix.commit_step does;
-- helix.session_num and helix.append_events raised foreign_key_violation. Nothing reads
-- the code (the Python side checks for the session first), so a 0.1.0 worker is unaffected.

CREATE OR REPLACE FUNCTION helix.session_num(sid text) RETURNS bigint LANGUAGE plpgsql STABLE STRICT AS $$
DECLARE
    found_num bigint;
BEGIN
    SELECT num INTO found_num FROM helix.sessions WHERE id = sid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'no_data_found';
    END IF;
    RETURN found_num;
END;
$$;

CREATE OR REPLACE FUNCTION helix.append_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    snum bigint;
    last_seq bigint;
BEGIN
    SELECT num INTO snum FROM helix.sessions WHERE id = sid FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'no_data_found';
    END IF;
    last_seq := helix.insert_events(snum, run_no, step_no, evs);
    UPDATE helix.sessions SET event_seq = last_seq WHERE num = snum;
    RETURN last_seq;
END;
$$;
