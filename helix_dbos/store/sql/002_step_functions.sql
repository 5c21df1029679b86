-- Server-side functions for the hot path: one agent step is committed by ONE call to
-- helix.commit_step inside the DBOS datasource transaction that checkpoints it.

-- Append events to a session's stream; seq numbers come from sessions.event_seq.
-- The caller must hold the session row (FOR UPDATE or a prior UPDATE in the same tx).
CREATE FUNCTION helix.append_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n integer := COALESCE(jsonb_array_length(evs), 0);
    last_seq bigint;
BEGIN
    UPDATE helix.sessions SET event_seq = event_seq + n WHERE id = sid RETURNING event_seq INTO last_seq;
    INSERT INTO helix.events (session_id, seq, run, step, type, data)
    SELECT sid, last_seq - n + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb)
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);
    RETURN last_seq;
END;
$$;

-- End a run that is still in progress: session and run rows take the final status, its
-- pending calls are cancelled, and one event says so. Returns false (and writes nothing)
-- when the run had already ended.
CREATE FUNCTION helix.end_run(sid text, run_no integer, final_status text, err text,
                              reason text, ev jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    cur_step integer;
BEGIN
    UPDATE helix.sessions
       SET status = final_status, error = err, stop_reason = reason,
           interrupt_requested = false, version = version + 1, updated_at = now()
     WHERE id = sid AND run_count = run_no AND status IN ('active', 'awaiting_approval', 'awaiting_client_tool')
    RETURNING step_count INTO cur_step;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE helix.runs
       SET status = final_status, error = err, stop_reason = reason, end_step = cur_step, ended_at = now()
     WHERE session_id = sid AND run = run_no;
    -- The run's gated calls can no longer be answered.
    UPDATE helix.pending_tool_calls SET status = 'cancelled'
     WHERE session_id = sid AND run = run_no AND status = 'pending';
    IF ev IS NOT NULL THEN
        PERFORM helix.append_events(sid, run_no, cur_step, jsonb_build_array(ev));
    END IF;
    RETURN true;
END;
$$;

-- Commit one agent step. p is:
--   {session_id, run, step, messages: [...], patch: [...]|null, snapshot: {...}|null,
--    usage: [{source, name, input_tokens, output_tokens, total_tokens, cost_usd, ms, success}],
--    events: [{type, data}], terminal: {status, output, error, stop_reason}|null,
--    resolved: [{tool_call_id, status}] (gated calls answered or timed out in this step)}
-- The session must be active at step p.step - 1 (compare-and-set); otherwise it raises
-- and nothing is written. Returns {interrupted: bool}: an interrupt requested by anyone
-- ends a non-terminal run here, in the same transaction.
CREATE FUNCTION helix.commit_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
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
    IF cur.step_count <> step_no - 1 OR cur.status NOT IN ('active', 'awaiting_approval', 'awaiting_client_tool') THEN
        RAISE EXCEPTION 'helix: session % is at step % with status %, cannot commit step %',
            sid, cur.step_count, cur.status, step_no USING ERRCODE = 'serialization_failure';
    END IF;
    interrupted := cur.interrupt_requested AND term IS NULL;
    evs := COALESCE(p->'events', '[]'::jsonb)
        || CASE WHEN interrupted THEN jsonb_build_array(jsonb_build_object(
                'type', 'interrupted', 'data', jsonb_build_object('step', step_no)))
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
    INSERT INTO helix.events (session_id, seq, run, step, type, data)
    SELECT sid, cur.event_seq + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb)
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);

    -- Gated calls answered (or timed out) in this step leave the pending list; a client
    -- tool's wait is recorded as usage, from the request to the recorded answer.
    IF jsonb_typeof(p->'resolved') = 'array' THEN
        UPDATE helix.pending_tool_calls pc SET status = r.status
          FROM jsonb_to_recordset(p->'resolved') AS r(tool_call_id text, status text)
         WHERE pc.session_id = sid AND pc.tool_call_id = r.tool_call_id;
        INSERT INTO helix.usage (session_id, run, step, source, name, ms, success)
        SELECT sid, run_no, step_no, 'client_tool_wait', pc.tool_name,
               1000 * extract(epoch FROM COALESCE(a.answered_at, now()) - pc.requested_at), a.answered_at IS NOT NULL
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
    RETURN jsonb_build_object('interrupted', interrupted);
END;
$$;
