-- A step's messages as they were committed, from helix.step_messages' row (019): the
-- parts helix.compact_messages left out are read back from the step's events in the
-- stream (helix.message_part_from_event). A row with nothing left out (rows before 019, a fork's, a previous release's)
-- comes back as it is, without a lookup. The view helix.transcript shows every row so.
-- An event that is not there any more (the stream is append-only; only prune deletes,
-- a session at a time) is an error, never a message with a part missing.
CREATE OR REPLACE FUNCTION helix.expand_messages(snum bigint, run_no integer, step_no integer, stored jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    prefix text := run_no || '.' || step_no || '.';
    msgs jsonb := '[]'::jsonb;
    m jsonb;
    calls jsonb;
    c jsonb;
    ev jsonb;
BEGIN
    IF NOT stored @? '$[*] ? ((@.role == "tool" && !(exists(@.content)))
                           || (@.role == "assistant" && (@.content == null
                                                         || exists(@.tool_calls[*] ? (!(exists(@.name)))))))' THEN
        RETURN stored;
    END IF;
    FOR m IN SELECT value FROM jsonb_array_elements(stored) LOOP
        IF m->>'role' = 'tool' AND NOT m ? 'content' THEN
            ev := helix.step_event(snum, step_no, prefix || 'result:' || (m->>'tool_call_id'));
            m := helix.message_part_from_event('tool_result', ev);
        ELSIF m->>'role' = 'assistant' THEN
            IF jsonb_typeof(m->'content') = 'null' THEN
                ev := helix.step_event(snum, step_no, prefix || 'text');
                m := jsonb_set(m, '{content}', helix.message_part_from_event('text', ev));
            END IF;
            IF jsonb_typeof(m->'tool_calls') = 'array' THEN
                calls := '[]'::jsonb;
                FOR c IN SELECT value FROM jsonb_array_elements(m->'tool_calls') LOOP
                    IF NOT c ? 'name' THEN
                        ev := helix.step_event(snum, step_no, prefix || 'call:' || (c->>'id'));
                        c := helix.message_part_from_event('tool_call', ev);
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
