-- A step's rows take fewer bytes (issue 19).
--
-- helix.compact_messages writes a message part that the stream holds word for word as the
-- call's id alone (a tool result, an assistant's call), and an assistant message of tool
-- calls only as the array of its calls; helix.expand_messages reads those shapes and 019's.
-- On the peers' workload a step of two tool calls is stored in 40 bytes instead of 194.
-- No row changes: rows stored before are read as they are. A worker of the release before
-- finds the last assistant message of a transcript from the rows as stored
-- (`messages @> '[{"role": "assistant"}]'`): it misses one stored as an array and starts
-- its tail at an earlier one, which reads more rows and finds the same message.
--
-- helix.commit_step writes the next step's step_start as it is sent: this release sends it
-- without a key (only the commit writes it, once), which saves an entry of
-- stream_step_key_idx a step.

-- A tool_result event says how long its tool ran (`ms`), when its tool step ran it, and a
-- step_finish no longer lists its tool calls (`usage.tools`, 021): helix.usage_log reads a
-- committed step's tool rows from its tool_result events that have `ms`. A step a worker
-- of the release before committed has its tools in its step_finish and no `ms` in its
-- results, so no call is counted twice; a step that was never committed (no step_finish)
-- counts no tool, as before. helix.message_part_from_event leaves `ms` out of a tool
-- message read from its event.
CREATE OR REPLACE VIEW helix.usage_log AS
SELECT id, session_num, run, step, source, name, input_tokens, output_tokens, total_tokens, cost_usd, ms,
       success, created_at
  FROM helix.step_usage
UNION ALL
SELECT NULL::bigint, e.session_num, e.run, e.step, 'llm', e.data->'usage'->>'model',
       COALESCE((e.data->'usage'->>'input_tokens')::integer, 0),
       COALESCE((e.data->'usage'->>'output_tokens')::integer, 0),
       COALESCE((e.data->'usage'->>'total_tokens')::integer, 0),
       (e.data->'usage'->>'cost_usd')::double precision,
       COALESCE((e.data->'usage'->>'latency_ms')::double precision, 0),
       COALESCE((e.data->'usage'->>'success')::boolean, true), e.created_at
  FROM helix.stream e
 WHERE e.type = 'step_finish' AND jsonb_typeof(e.data->'usage'->'model') = 'string'
UNION ALL
SELECT NULL::bigint, e.session_num, e.run, e.step, 'tool', t->>'name', 0, 0, 0, NULL::double precision,
       COALESCE((t->>'ms')::double precision, 0), COALESCE((t->>'success')::boolean, true), e.created_at
  FROM helix.stream e
 CROSS JOIN LATERAL jsonb_array_elements(e.data->'usage'->'tools') AS t
 WHERE e.type = 'step_finish' AND jsonb_typeof(e.data->'usage'->'model') = 'string'
   AND jsonb_typeof(e.data->'usage'->'tools') = 'array'
UNION ALL
SELECT NULL::bigint, e.session_num, e.run, e.step, 'tool', e.data->>'tool_name', 0, 0, 0, NULL::double precision,
       (e.data->>'ms')::double precision, NOT COALESCE((e.data->>'is_error')::boolean, false), e.created_at
  FROM helix.stream e
 WHERE e.type = 'tool_result' AND jsonb_typeof(e.data->'ms') = 'number'
   AND EXISTS (SELECT 1 FROM helix.stream f
                WHERE f.session_num = e.session_num AND f.step = e.step AND f.key = e.run || '.' || e.step || '.step_finish');

-- The functions this version changed are in functions/, each as it is now: migrate
-- applies a function's file whenever it changed (helix_dbos/store/migrations.py).
