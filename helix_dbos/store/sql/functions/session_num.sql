-- The number of session sid (helix.sessions.num, 016), which the tables a step writes to
-- name their sessions by; an error when there is no such session.
CREATE OR REPLACE FUNCTION helix.session_num(sid text) RETURNS bigint LANGUAGE plpgsql STABLE AS $$
DECLARE
    found_num bigint;
BEGIN
    SELECT num INTO found_num FROM helix.sessions WHERE id = sid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN found_num;
END;
$$;
