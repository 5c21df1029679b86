-- Refuse a message to a helix topic that is not portable JSON: DBOS would unpickle it.
CREATE OR REPLACE FUNCTION helix.refuse_pickled_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'helix: messages to helix topics must be portable JSON (serialization_type=PORTABLE), not %',
        COALESCE(NEW.serialization, 'the default (pickle)')
        USING ERRCODE = 'invalid_parameter_value';
END;
$$;
