-- Commit one agent step in one transaction; workflow code calls it after the step's last
-- DBOS operation. p is:
--   {session_id, run, step, messages: [...], patch: [...]|null, snapshot: {...}|null,
--    usage: [{source, name, input_tokens, output_tokens, total_tokens, cost_usd, ms, success}]
--      (usage no event holds: the step_finish event holds the model's and the tools', 021),
--    events: [{type, data, key}], next_step: {type, data}|null (the next step's step_start:
--      only the commit writes it, once, so it needs no key (022); an earlier release's has one),
--    terminal: {status, output, error, stop_reason}|null,
--    resolved: [{tool_call_id, status}] (gated calls answered or timed out in this step)}
-- Returns {interrupted: bool}: an interrupt requested by anyone ends a non-terminal run
-- here, in the same transaction.
--
-- It is idempotent on its own (009). A step this run committed already is known by its
-- step_finish key ('<run>.<step>.step_finish', which only a commit writes): calling again
-- writes nothing and answers {interrupted, replayed: true}, as the first call did. A step
-- that is neither the next one nor committed is refused with {refused: status,
-- step_count}, writing nothing (an aborted run; a session another run moved on).
--
-- Of the step's keyed events it appends those no earlier write put in the stream (008),
-- numbered after the stream's last seq under the session row's lock (013), then the next
-- step's step_start when the run goes on (012). sessions.updated_at moves only when the
-- session's status does, so the row's update is in place (HOT, 012). The step's recorded
-- tool outcomes (006) go in the same transaction. The step's messages go after its events:
-- what of them the stream holds is stored once, there (019), and so is the step's state
-- patch (020).
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
    last_seq bigint;
    step_patch jsonb := CASE WHEN jsonb_typeof(p->'patch') = 'array' THEN p->'patch' ELSE '[]'::jsonb END;
    patch_event jsonb;
BEGIN
    SELECT * INTO cur FROM helix.sessions WHERE id = sid FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'no_data_found';
    END IF;
    IF EXISTS (SELECT 1 FROM helix.stream
                WHERE session_num = cur.num AND step = step_no AND key = run_no || '.' || step_no || '.step_finish') THEN
        RETURN jsonb_build_object('interrupted', EXISTS (
            SELECT 1 FROM helix.stream
             WHERE session_num = cur.num AND step = step_no AND key = run_no || '.' || step_no || '.interrupted'),
            'replayed', true);
    END IF;
    IF cur.step_count <> step_no - 1 OR cur.status NOT IN ('active', 'awaiting_approval', 'awaiting_client_tool') THEN
        RETURN jsonb_build_object('refused', cur.status, 'step_count', cur.step_count);
    END IF;
    interrupted := cur.interrupt_requested AND term IS NULL;
    last_seq := helix.last_event_seq(cur.num);
    -- Only the events no earlier write of this step put in the stream (by key).
    evs := helix.unwritten_events(cur.num, step_no, COALESCE(p->'events', '[]'::jsonb))
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
           event_seq = last_seq + jsonb_array_length(evs),
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

    IF jsonb_typeof(p->'snapshot') = 'object' THEN
        INSERT INTO helix.state_snapshots (session_id, step, state) VALUES (sid, step_no, p->'snapshot');
    END IF;

    INSERT INTO helix.step_usage (session_num, run, step, source, name, input_tokens, output_tokens,
                                  total_tokens, cost_usd, ms, success)
    SELECT cur.num, run_no, step_no, u.source, u.name, COALESCE(u.input_tokens, 0), COALESCE(u.output_tokens, 0),
           COALESCE(u.total_tokens, 0), u.cost_usd, COALESCE(u.ms, 0), COALESCE(u.success, true)
    FROM jsonb_to_recordset(COALESCE(p->'usage', '[]'::jsonb)) AS u(
        source text, name text, input_tokens integer, output_tokens integer, total_tokens integer,
        cost_usd double precision, ms double precision, success boolean);

    -- seqs continue from the stream's last, read under the row lock;
    -- the next step's step_start, last, belongs to that step
    INSERT INTO helix.stream (session_num, seq, run, step, type, data, key)
    SELECT cur.num, last_seq + t.ord, run_no, step_no + (t.ord > n_own)::integer, t.e->>'type',
           COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);

    -- the step's patch: a row unless its patch event holds it as it is (020); a row of
    -- part 0 stands for the step in the log, so a step with an event and a patch that
    -- differs (even none) gets one
    SELECT data->'patches' INTO patch_event FROM helix.stream
     WHERE session_num = cur.num AND step = step_no AND key = run_no || '.' || step_no || '.patch';
    IF patch_event IS DISTINCT FROM step_patch AND (patch_event IS NOT NULL OR step_patch <> '[]'::jsonb) THEN
        INSERT INTO helix.step_patches (session_num, step, run, patch) VALUES (cur.num, step_no, run_no, step_patch);
    END IF;

    -- the step's messages: one row (017), without what the stream now holds of them (019)
    IF n_msgs > 0 THEN
        INSERT INTO helix.step_messages (session_num, first_seq, run, step, messages)
        VALUES (cur.num, cur.message_count, run_no, step_no,
                helix.compact_messages(cur.num, run_no, step_no, p->'messages'));
    END IF;

    -- Gated calls answered (or timed out) in this step leave the pending list; a client
    -- tool's wait is recorded as usage: to the recorded answer, or to the deadline of a
    -- call that timed out (an answer recorded after the deadline does not count).
    IF jsonb_typeof(p->'resolved') = 'array' THEN
        UPDATE helix.pending_tool_calls pc SET status = r.status
          FROM jsonb_to_recordset(p->'resolved') AS r(tool_call_id text, status text)
         WHERE pc.session_id = sid AND pc.tool_call_id = r.tool_call_id;
        INSERT INTO helix.step_usage (session_num, run, step, source, name, ms, success)
        SELECT cur.num, run_no, step_no, 'client_tool_wait', pc.tool_name,
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
