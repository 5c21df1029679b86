-- A step's events ride in its checkpoint (012): the LLM step and every tool step return,
-- first in their output, the keyed events they stream:
--     {"helix_events": {"session_id", "run", "step", "events": [{type, data, key}]}, ...result}
-- This trigger on dbos.operation_outputs writes them to the stream (by key, so exactly
-- once) in the transaction in which DBOS saves the checkpoint, and saves the checkpoint
-- without them; a replay, which reads the saved output, has none to write. An output
-- whose session is gone is saved without its events. install_dbos_hooks' WHEN looks for
-- the key in the first 24 characters of a portable-JSON output; an output that has it
-- only deeper inside is saved as it came. It does not write the session row (013).
CREATE OR REPLACE FUNCTION helix.write_carried_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    output jsonb := NEW.output::jsonb;
    carried jsonb := output->'helix_events';
    snum bigint;
BEGIN
    IF jsonb_typeof(carried) IS DISTINCT FROM 'object' THEN
        RETURN NEW;  -- not a helix step's output after all: saved as it came
    END IF;
    SELECT num INTO snum FROM helix.sessions WHERE id = carried->>'session_id' FOR UPDATE;
    IF FOUND THEN
        PERFORM helix.insert_unwritten_events(snum, (carried->>'run')::integer,
                                              (carried->>'step')::integer, carried->'events');
    END IF;
    -- json, not jsonb: the checkpoint keeps its keys in the order the step wrote them, so a
    -- replayed tool result reads back exactly as the live one was (jsonb sorts keys).
    NEW.output := (SELECT COALESCE(json_object_agg(e.key, e.value ORDER BY e.n), '{}'::json)::text
                     FROM json_each(NEW.output::json) WITH ORDINALITY AS e(key, value, n)
                    WHERE e.key <> 'helix_events');
    RETURN NEW;
END;
$$;
