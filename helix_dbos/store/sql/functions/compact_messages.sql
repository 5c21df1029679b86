-- A step's messages as helix.step_messages stores them: each part the step's stream
-- already holds, word for word, is left out and read back from the stream by
-- helix.expand_messages. Each is told by a shape a full message never has (full messages
-- are objects, stored without null fields):
--   a tool result           "<id>", the call's id for the message   (022)
--                           <- data of the event '<run>.<step>.result:<id>', plus the role;
--   an assistant's call     "<id>" in place of the call             (022)
--                           <- name and arguments from the event '<run>.<step>.call:<id>';
--   an assistant's text     "content": null                         (019)
--                           <- content of the event '<run>.<step>.text';
--   an assistant message of tool calls only: its tool_calls array, compacted so, in place
--                           of the message                          (022)
--                           <- {"role": "assistant", "tool_calls": [...]}.
-- On the peers' workload a step of two tool calls is stored as [["a0", "c0"], "a0", "c0"]:
-- 40 bytes, against 194 in 019's shapes ({"id": id}, {"role": "tool", "tool_call_id": id}),
-- which helix.expand_messages still reads. A part is left out only when its event equals
-- it (helix.message_part_from_event), so whatever differs (a __finish__ call, which has no
-- event; text the model streamed otherwise) stays as it was. Called by helix.commit_step
-- after the step's events are in the stream.
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
                m := m->'tool_call_id';
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
                        c := c->'id';
                    END IF;
                    calls := calls || jsonb_build_array(c);
                END LOOP;
                m := CASE WHEN m - 'tool_calls' = '{"role": "assistant"}'::jsonb AND jsonb_array_length(calls) > 0
                          THEN calls ELSE jsonb_set(m, '{tool_calls}', calls) END;
            END IF;
        END IF;
        stored := stored || jsonb_build_array(m);
    END LOOP;
    RETURN stored;
END;
$$;
