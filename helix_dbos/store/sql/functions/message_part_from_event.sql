-- A part of a step's messages as its event in the stream holds it (019): a tool_result
-- event's data is a tool message without its role (and with how long the tool ran, `ms`,
-- which the message does not have: 022), a tool_call event's data a call under other
-- names, a text event's data the assistant's content. What helix.compact_messages
-- compares a part with, and helix.expand_messages puts back.
--   SELECT helix.message_part_from_event('tool_call', '{"tool_call_id": "c1", "tool_name": "f", "input": {}}');
--   -> {"id": "c1", "name": "f", "arguments": {}}
CREATE OR REPLACE FUNCTION helix.message_part_from_event(kind text, data jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE kind
        WHEN 'tool_result' THEN jsonb_build_object('role', 'tool') || (data - 'ms')
        WHEN 'tool_call' THEN jsonb_build_object('id', data->'tool_call_id', 'name', data->'tool_name', 'arguments', data->'input')
        WHEN 'text' THEN data->'content'
    END
$$;
