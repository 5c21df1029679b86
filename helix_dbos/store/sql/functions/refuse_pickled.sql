-- Refuse a row that DBOS would unpickle: a message to a helix topic, or a helix run's
-- input, that is not portable JSON. The trigger's argument says what must be portable:
--     EXECUTE FUNCTION helix.refuse_pickled('messages to helix topics must be portable JSON')
CREATE OR REPLACE FUNCTION helix.refuse_pickled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'helix: % (serialization_type=PORTABLE), not %', TG_ARGV[0],
        COALESCE(NEW.serialization, 'the default (pickle)')
        USING ERRCODE = 'invalid_parameter_value';
END;
$$;
