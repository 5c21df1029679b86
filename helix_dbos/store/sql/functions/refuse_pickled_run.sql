-- Refuse a helix run whose input is not portable JSON: DBOS would unpickle it.
CREATE OR REPLACE FUNCTION helix.refuse_pickled_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'helix: helix_agent_run takes portable JSON input (serialization_type=PORTABLE), not %',
        COALESCE(NEW.serialization, 'the default (pickle)')
        USING ERRCODE = 'invalid_parameter_value';
END;
$$;
