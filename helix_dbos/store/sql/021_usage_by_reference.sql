-- A step's usage was stored twice: the model's in its step_finish event (tokens, cost,
-- latency) and as a row of helix.usage_log, a tool's as a row only; three rows a turn
-- of two tool calls, 492 bytes with their key on the peers' workload (issue 19). The
-- step_finish event now holds the whole step's usage: the model's under its name and each
-- executed tool call's time and success (`usage.model`, `usage.success`, `usage.tools`),
-- and the step commit writes rows only for the usage no event holds: a client tool's wait,
-- and what a worker of the release before sends.
--
-- The rows as stored move to helix.step_usage (with every row before this version).
-- helix.usage_log becomes a view: those rows, then a row for the model and one for each
-- tool of every step_finish that holds its usage (it names its model). A step_finish is
-- written only by a step's commit, so what it holds is never counted for a step a run
-- left unfinished. A worker of the release before reads helix.usage_log (its summary) and
-- deletes from it (prune) by name while a rolling deploy runs; the view takes its deletes
-- and inserts (helix.delete_usage_row, helix.insert_usage_row).
ALTER TABLE helix.usage_log RENAME TO step_usage;
ALTER TABLE helix.step_usage RENAME CONSTRAINT usage_log_pkey TO step_usage_pkey;
ALTER TABLE helix.step_usage RENAME CONSTRAINT usage_log_source_check TO step_usage_source_check;
ALTER TABLE helix.step_usage RENAME CONSTRAINT usage_log_session_num_fkey TO step_usage_session_num_fkey;
ALTER SEQUENCE helix.usage_log_id_seq RENAME TO step_usage_id_seq;

DROP VIEW helix.usage;
CREATE VIEW helix.usage_log AS
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
   AND jsonb_typeof(e.data->'usage'->'tools') = 'array';
CREATE TRIGGER usage_log_insert INSTEAD OF INSERT ON helix.usage_log
    FOR EACH ROW EXECUTE FUNCTION helix.insert_usage_row();
CREATE TRIGGER usage_log_delete INSTEAD OF DELETE ON helix.usage_log
    FOR EACH ROW EXECUTE FUNCTION helix.delete_usage_row();

CREATE VIEW helix.usage AS
SELECT u.id, s.id AS session_id, u.run, u.step, u.source, u.name, u.input_tokens, u.output_tokens,
       u.total_tokens, u.cost_usd, u.ms, u.success, u.created_at
  FROM helix.usage_log u JOIN helix.sessions s ON s.num = u.session_num;
