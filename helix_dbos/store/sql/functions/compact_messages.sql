-- A step's messages as helix.step_messages stores them (019): each part the step's
-- stream already holds, word for word, is left out and read back from the stream by
-- helix.expand_messages. Three parts can be, each told by a shape a full message never
-- has (full messages are stored without null fields):
--   a tool result        {"role": "tool", "tool_call_id": id}      (no content)
--                        <- data of the event '<run>.<step>.result:<id>', plus the role;
--   an assistant's call  {"id": id}                                (no name)
--                        <- name and arguments from the event '<run>.<step>.call:<id>';
--   an assistant's text  "content": null
--                        <- content of the event '<run>.<step>.text'.
-- A part is left out only when its event equals it (helix.message_part_from_event), so whatever differs (a __finish__
-- call, which has no event; text the model streamed otherwise) stays as it was. Called by
-- helix.commit_step after the step's events are in the stream.
CREATE OR REPLACE FUNCTION helix.compact_messages(snum bigint, run_no integer, step_no integer, msgs jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    prefix text := run_no || '.' || step_no || '.';
    stored jsonb := '[]'::jsonb;
    m jsonb;
    calls jsonb;
    c jsonb;
    ev jsonb;
BEGIN
    FOR m IN SELECT value FROM jsonb_array_elements(msgs) LOOP
        IF m->>'role' = 'tool' THEN
            SELECT data INTO ev FROM helix.stream
             WHERE session_num = snum AND step = step_no AND key = prefix || 'result:' || (m->>'tool_call_id');
            IF helix.message_part_from_event('tool_result', ev) = m THEN
                m := jsonb_build_object('role', 'tool', 'tool_call_id', m->'tool_call_id');
            END IF;
        ELSIF m->>'role' = 'assistant' THEN
            IF jsonb_typeof(m->'content') = 'string' THEN
                SELECT data INTO ev FROM helix.stream
                 WHERE session_num = snum AND step = step_no AND key = prefix || 'text';
                IF helix.message_part_from_event('text', ev) = m->'content' THEN
                    m := jsonb_set(m, '{content}', 'null'::jsonb);
                END IF;
            END IF;
            IF jsonb_typeof(m->'tool_calls') = 'array' THEN
                calls := '[]'::jsonb;
                FOR c IN SELECT value FROM jsonb_array_elements(m->'tool_calls') LOOP
                    SELECT data INTO ev FROM helix.stream
                     WHERE session_num = snum AND step = step_no AND key = prefix || 'call:' || (c->>'id');
                    IF helix.message_part_from_event('tool_call', ev) = c THEN
                        c := jsonb_build_object('id', c->'id');
                    END IF;
                    calls := calls || jsonb_build_array(c);
                END LOOP;
                m := jsonb_set(m, '{tool_calls}', calls);
            END IF;
        END IF;
        stored := stored || jsonb_build_array(m);
    END LOOP;
    RETURN stored;
END;
$$;
