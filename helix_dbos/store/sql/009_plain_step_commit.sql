-- The step commit is no longer a DBOS datasource transaction (issue 19): it is a plain
-- transaction that workflow code calls after the step's last DBOS operation, idempotent on
-- its own, so it needs no checkpoint. A run that replays a step already committed (after a
-- crash between the commit and the next checkpoint, or when an aborted run is resumed in
-- place) calls it again with the same step: it recognizes the step by the key of the
-- step's step_finish event ('<run>.<step>.step_finish', which only a commit writes), writes
-- nothing, and answers what the first call answered: whether an interrupt ended the run at
-- that step (the interrupted event now carries the key '<run>.<step>.interrupted').
--
-- A step that is neither the next one nor already committed by this run is refused with
-- {"refused": status}, writing nothing (an aborted run; a session another run moved on).
-- The step's recorded tool outcomes (006) are dropped here, in the same transaction.

CREATE OR REPLACE FUNCTION helix.commit_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    sid text := p->>'session_id';
    run_no integer := (p->>'run')::integer;
    step_no integer := (p->>'step')::integer;
    term jsonb := NULLIF(p->'terminal', 'null'::jsonb);
    n_msgs integer := COALESCE(jsonb_array_length(p->'messages'), 0);
    evs jsonb;
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
           updated_at = now()
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

    -- seqs continue from the event_seq read under the row lock (as helix.append_events does)
    INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
    SELECT sid, cur.event_seq + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
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
