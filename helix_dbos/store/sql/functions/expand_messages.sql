-- A step's messages as they were committed, from helix.step_messages' row: the parts
-- helix.compact_messages left out (its shapes of 022, and those of 019) are read back from
-- the step's events in the stream (helix.message_part_from_event). A row with nothing
-- left out (rows before 019, a fork's, a previous release's) comes back as it is, without
-- a lookup. The view helix.transcript shows every row so. An event that is not there any
-- more (the stream is append-only; only prune deletes, a session at a time) is an error,
-- never a message with a part missing.
CREATE OR REPLACE FUNCTION helix.expand_messages(snum bigint, run_no integer, step_no integer, stored jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    prefix text := run_no || '.' || step_no || '.';
    msgs jsonb := '[]'::jsonb;
    m jsonb;
    calls jsonb;
    c jsonb;
BEGIN
    -- strict for the elements' types: in lax mode a filter looks into an array, not at it
    IF NOT (stored @? 'strict $[*].type() ? (@ != "object")'
            OR stored @? '$[*] ? ((@.role == "tool" && !(exists(@.content)))
                               || (@.role == "assistant" && (@.content == null
                                                             || exists(@.tool_calls[*] ? (@.type() == "string"
                                                                                          || !(exists(@.name)))))))') THEN
        RETURN stored;
    END IF;
    FOR m IN SELECT value FROM jsonb_array_elements(stored) LOOP
        IF jsonb_typeof(m) = 'string' THEN
            m := jsonb_build_object('role', 'tool', 'tool_call_id', m);
        ELSIF jsonb_typeof(m) = 'array' THEN
            m := jsonb_build_object('role', 'assistant', 'tool_calls', m);
        END IF;
        IF m->>'role' = 'tool' AND NOT m ? 'content' THEN
            m := helix.message_part_from_event('tool_result',
                                               helix.step_event(snum, step_no, prefix || 'result:' || (m->>'tool_call_id')));
        ELSIF m->>'role' = 'assistant' THEN
            IF jsonb_typeof(m->'content') = 'null' THEN
                m := jsonb_set(m, '{content}', helix.message_part_from_event('text', helix.step_event(snum, step_no, prefix || 'text')));
            END IF;
            IF jsonb_typeof(m->'tool_calls') = 'array' THEN
                calls := '[]'::jsonb;
                FOR c IN SELECT value FROM jsonb_array_elements(m->'tool_calls') LOOP
                    IF jsonb_typeof(c) = 'string' THEN
                        c := jsonb_build_object('id', c);
                    END IF;
                    IF NOT c ? 'name' THEN
                        c := helix.message_part_from_event('tool_call', helix.step_event(snum, step_no, prefix || 'call:' || (c->>'id')));
                    END IF;
                    calls := calls || jsonb_build_array(c);
                END LOOP;
                m := jsonb_set(m, '{tool_calls}', calls);
            END IF;
        END IF;
        msgs := msgs || jsonb_build_array(m);
    END LOOP;
    RETURN msgs;
END;
$$;
