-- A step's events ride in its checkpoint (issue 19): the LLM step and every tool step
-- return, first in their output, the keyed events they stream:
--     {"helix_events": {"session_id", "run", "step", "events": [{type, data, key}]}, ...result}
-- A trigger on dbos.operation_outputs writes them to the stream (helix.append_events_once,
-- so by key, exactly once) in the transaction in which DBOS saves the checkpoint, and
-- saves the checkpoint without them. The events reach the stream the moment their
-- source is checkpointed, without a transaction of their own, and a replay, which reads
-- the saved output, has none to write. An output whose session is gone is saved without
-- its events. The trigger's WHEN looks for the key in the first 24 characters of a
-- portable-JSON output (so whitespace in the serialization does not hide it); an output
-- that has it only deeper inside is saved as it came.
-- helix.unwritten_events as in 008, with each key looked up in events_key_idx on its own:
-- 008's NOT EXISTS, inside an OR, was planned as a hash of every key of the session, so
-- each keyed write read the session's whole stream (0.5 ms at 400 events, growing with it).
CREATE OR REPLACE FUNCTION helix.unwritten_events(sid text, evs jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE(jsonb_agg(t.e ORDER BY t.ord), '[]'::jsonb)
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord)
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM helix.events x WHERE x.session_id = sid AND x.key = t.e->>'key'
    ) AS written
    WHERE t.e->>'key' IS NULL
       OR written.n = 0
      AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(evs) WITH ORDINALITY AS u(e, ord)
                       WHERE u.ord < t.ord AND u.e->>'key' = t.e->>'key');
$$;

CREATE FUNCTION helix.write_carried_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    output jsonb := NEW.output::jsonb;
    carried jsonb := output->'helix_events';
BEGIN
    IF jsonb_typeof(carried) IS DISTINCT FROM 'object' THEN
        RETURN NEW;  -- not a helix step's output after all: saved as it came
    END IF;
    IF EXISTS (SELECT 1 FROM helix.sessions WHERE id = carried->>'session_id') THEN
        PERFORM helix.append_events_once(carried->>'session_id', (carried->>'run')::integer,
                                         (carried->>'step')::integer, carried->'events');
    END IF;
    NEW.output := (output - 'helix_events')::text;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION helix.install_dbos_hooks() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('dbos.workflow_status') IS NULL OR to_regclass('dbos.notifications') IS NULL
       OR to_regclass('dbos.operation_outputs') IS NULL THEN
        RAISE EXCEPTION 'helix: DBOS''s system tables are not in this database (run DBOS''s migrations first)';
    END IF;
    CREATE OR REPLACE TRIGGER helix_follow_status
        AFTER UPDATE OF status ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers')
                           AND OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION helix.follow_dbos_status();
    CREATE OR REPLACE TRIGGER helix_follow_new_workflow
        AFTER INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers'))
        EXECUTE FUNCTION helix.follow_new_run_workflow();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_message
        BEFORE INSERT ON dbos.notifications
        FOR EACH ROW WHEN (NEW.topic LIKE 'helix.%' AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_message();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_run
        BEFORE INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name IN ('helix_agent_run', 'helix_await_answers')
                           AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_run();
    CREATE OR REPLACE TRIGGER helix_write_carried_events
        BEFORE INSERT ON dbos.operation_outputs
        FOR EACH ROW WHEN (NEW.serialization = 'portable_json' AND strpos(left(NEW.output, 24), '"helix_events"') > 0)
        EXECUTE FUNCTION helix.write_carried_events();
END;
$$;

-- The step commit as in 009, except:
-- - it also writes the next step's step_start (p->'next_step', a keyed event) when the run
--   goes on: neither a terminal step nor an interrupted one. The first step's comes with
--   the run's run_start;
-- - sessions.updated_at moves when the session's status does (a run ends, is interrupted,
--   stops waiting), no longer at every step: a step's update of the session row then
--   changes no indexed column, so Postgres updates it in place (HOT) and the table and its
--   indexes do not grow with every step. fillfactor leaves room on each page for that.
ALTER TABLE helix.sessions SET (fillfactor = 70);

CREATE OR REPLACE FUNCTION helix.commit_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    sid text := p->>'session_id';
    run_no integer := (p->>'run')::integer;
    step_no integer := (p->>'step')::integer;
    term jsonb := NULLIF(p->'terminal', 'null'::jsonb);
    n_msgs integer := COALESCE(jsonb_array_length(p->'messages'), 0);
    evs jsonb;
    n_own integer;
    cur helix.sessions%ROWTYPE;
    interrupted boolean;
BEGIN
    SELECT * INTO cur FROM helix.sessions WHERE id = sid FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'no_data_found';
    END IF;
    IF EXISTS (SELECT 1 FROM helix.events WHERE session_id = sid AND key = run_no || '.' || step_no || '.step_finish') THEN
        RETURN jsonb_build_object('interrupted', EXISTS (
            SELECT 1 FROM helix.events WHERE session_id = sid AND key = run_no || '.' || step_no || '.interrupted'),
            'replayed', true);
    END IF;
    IF cur.step_count <> step_no - 1 OR cur.status NOT IN ('active', 'awaiting_approval', 'awaiting_client_tool') THEN
        RETURN jsonb_build_object('refused', cur.status, 'step_count', cur.step_count);
    END IF;
    interrupted := cur.interrupt_requested AND term IS NULL;
    -- Only the events no earlier write of this step put in the stream (by key).
    evs := helix.unwritten_events(sid, COALESCE(p->'events', '[]'::jsonb))
        || CASE WHEN interrupted THEN jsonb_build_array(jsonb_build_object(
                'type', 'interrupted', 'data', jsonb_build_object('step', step_no),
                'key', run_no || '.' || step_no || '.interrupted'))
           ELSE '[]'::jsonb END;
    n_own := jsonb_array_length(evs);
    IF term IS NULL AND NOT interrupted AND jsonb_typeof(p->'next_step') = 'object' THEN
        evs := evs || jsonb_build_array(p->'next_step');
    END IF;

    -- The session row is written once per step: event_seq advances here too.
    UPDATE helix.sessions
       SET step_count = step_no, version = version + 1, message_count = message_count + n_msgs,
           event_seq = event_seq + jsonb_array_length(evs),
           status = CASE WHEN term IS NOT NULL THEN term->>'status'
                         WHEN interrupted THEN 'interrupted' ELSE 'active' END,
           output = CASE WHEN term IS NOT NULL AND term->>'status' = 'completed' THEN term->'output'
                         ELSE output END,
           error = CASE WHEN term IS NOT NULL THEN term->>'error' ELSE NULL END,
           stop_reason = CASE WHEN term IS NOT NULL THEN term->>'stop_reason'
                              WHEN interrupted THEN 'interrupted' ELSE stop_reason END,
           interrupt_requested = interrupt_requested AND NOT interrupted AND term IS NULL,
           updated_at = CASE WHEN term IS NOT NULL OR interrupted OR cur.status <> 'active' THEN now()
                             ELSE updated_at END
     WHERE id = sid;

    INSERT INTO helix.messages (session_id, seq, run, step, message)
    SELECT sid, cur.message_count + t.ord - 1, run_no, step_no, t.m
    FROM jsonb_array_elements(p->'messages') WITH ORDINALITY AS t(m, ord);

    IF jsonb_typeof(p->'patch') = 'array' AND jsonb_array_length(p->'patch') > 0 THEN
        INSERT INTO helix.state_patches (session_id, step, run, patch) VALUES (sid, step_no, run_no, p->'patch');
    END IF;
    IF jsonb_typeof(p->'snapshot') = 'object' THEN
        INSERT INTO helix.state_snapshots (session_id, step, state) VALUES (sid, step_no, p->'snapshot');
    END IF;

    INSERT INTO helix.usage (session_id, run, step, source, name, input_tokens, output_tokens,
                             total_tokens, cost_usd, ms, success)
    SELECT sid, run_no, step_no, u.source, u.name, COALESCE(u.input_tokens, 0), COALESCE(u.output_tokens, 0),
           COALESCE(u.total_tokens, 0), u.cost_usd, COALESCE(u.ms, 0), COALESCE(u.success, true)
    FROM jsonb_to_recordset(COALESCE(p->'usage', '[]'::jsonb)) AS u(
        source text, name text, input_tokens integer, output_tokens integer, total_tokens integer,
        cost_usd double precision, ms double precision, success boolean);

    -- seqs continue from the event_seq read under the row lock (as helix.append_events does);
    -- the next step's step_start, last, belongs to that step
    INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
    SELECT sid, cur.event_seq + t.ord, run_no, step_no + (t.ord > n_own)::integer, t.e->>'type',
           COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);

    -- Gated calls answered (or timed out) in this step leave the pending list; a client
    -- tool's wait is recorded as usage: to the recorded answer, or to the deadline of a
    -- call that timed out (an answer recorded after the deadline does not count).
    IF jsonb_typeof(p->'resolved') = 'array' THEN
        UPDATE helix.pending_tool_calls pc SET status = r.status
          FROM jsonb_to_recordset(p->'resolved') AS r(tool_call_id text, status text)
         WHERE pc.session_id = sid AND pc.tool_call_id = r.tool_call_id;
        INSERT INTO helix.usage (session_id, run, step, source, name, ms, success)
        SELECT sid, run_no, step_no, 'client_tool_wait', pc.tool_name,
               1000 * extract(epoch FROM CASE WHEN r.status = 'answered' THEN COALESCE(a.answered_at, now())
                                              ELSE LEAST(now(), pc.deadline) END - pc.requested_at),
               r.status = 'answered'
          FROM jsonb_to_recordset(p->'resolved') AS r(tool_call_id text, status text)
          JOIN helix.pending_tool_calls pc ON pc.session_id = sid AND pc.tool_call_id = r.tool_call_id
          LEFT JOIN helix.tool_call_answers a ON a.session_id = sid AND a.tool_call_id = r.tool_call_id
         WHERE pc.kind = 'client';
    END IF;

    IF term IS NOT NULL OR interrupted THEN
        UPDATE helix.runs
           SET status = CASE WHEN interrupted THEN 'interrupted' ELSE term->>'status' END,
               error = term->>'error',
               stop_reason = CASE WHEN interrupted THEN 'interrupted' ELSE term->>'stop_reason' END,
               end_step = step_no, ended_at = now()
         WHERE session_id = sid AND run = run_no;
    END IF;
    DELETE FROM helix.tool_outcomes WHERE session_id = sid AND step = step_no;
    RETURN jsonb_build_object('interrupted', interrupted);
END;
$$;
