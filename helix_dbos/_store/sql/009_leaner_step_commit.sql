-- A step's commit that trusts the caller to know its events are new: with p.fresh true,
-- it writes the step's events as given, without looking each key up in the stream (what
-- helix.unwritten_events does, and still does for a commit without p.fresh). The caller
-- says fresh when nothing of the step can be in the stream yet: the run's first execution,
-- not a continuation, and none of the step's live events sent. Should it be wrong, the
-- unique index on the stream's keys (events_step_key_idx) refuses the commit, writing
-- nothing, and the caller commits again without p.fresh.
--
-- It also drops the step's tool attempts (helix.tool_attempts, 004_tool_attempts.sql), as
-- it drops the step's recorded tool outcomes: once the step is committed no call of it
-- runs again, so no attempt of it can count as lost. Otherwise as in 005_lean_commit.sql.
CREATE OR REPLACE FUNCTION helix.commit_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    sid text := p->>'session_id';
    run_no integer := (p->>'run')::integer;
    step_no integer := (p->>'step')::integer;
    finish_key text := (p->>'run') || '.' || (p->>'step') || '.step_finish';
    term jsonb := NULLIF(p->'terminal', 'null'::jsonb);
    go_on text := COALESCE(p->>'status', term->>'status', 'active');
    if_interrupted text := COALESCE(p->>'status_if_interrupted', term->>'status', 'interrupted');
    fresh boolean := COALESCE((p->>'fresh')::boolean, false);
    new_status text;
    n_msgs integer := COALESCE(jsonb_array_length(p->'messages'), 0);
    evs jsonb;
    waits jsonb;
    cur helix.sessions%ROWTYPE;
    interrupted boolean;
    last_seq bigint;
BEGIN
    SELECT * INTO cur FROM helix.sessions WHERE id = sid FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'helix: session % does not exist', sid USING ERRCODE = 'no_data_found';
    END IF;
    IF EXISTS (SELECT 1 FROM helix.events WHERE session_num = cur.num AND step = step_no AND key = finish_key) THEN
        RETURN jsonb_build_object('interrupted', EXISTS (
            SELECT 1 FROM helix.events
             WHERE session_num = cur.num AND step = step_no AND key = run_no || '.' || step_no || '.interrupted'),
            'replayed', true);
    END IF;
    IF cur.step_count <> step_no - 1 OR NOT cur.status = ANY (helix.active_statuses()) THEN
        RETURN jsonb_build_object('refused', cur.status, 'step_count', cur.step_count);
    END IF;
    interrupted := cur.interrupt_requested AND term IS NULL;
    new_status := CASE WHEN cur.interrupt_requested THEN if_interrupted ELSE go_on END;

    -- Gated calls answered (or timed out) in this step leave the pending list; a client
    -- tool's wait lasts to the recorded answer, or to the deadline of a call that timed
    -- out (an answer recorded after the deadline does not count).
    IF jsonb_typeof(p->'resolved') = 'array' THEN
        UPDATE helix.pending_tool_calls pc SET status = r.status
          FROM jsonb_to_recordset(p->'resolved') AS r(tool_call_id text, status text)
         WHERE pc.session_num = cur.num AND pc.tool_call_id = r.tool_call_id;
        SELECT jsonb_agg(jsonb_build_object(
                   'name', pc.tool_name,
                   'ms', 1000 * extract(epoch FROM CASE WHEN r.c->>'status' = 'answered' THEN COALESCE(a.answered_at, now())
                                                        ELSE LEAST(now(), pc.deadline) END - pc.requested_at),
                   'success', r.c->>'status' = 'answered') ORDER BY r.ord)
          INTO waits
          FROM jsonb_array_elements(p->'resolved') WITH ORDINALITY AS r(c, ord)
          JOIN helix.pending_tool_calls pc ON pc.session_num = cur.num AND pc.tool_call_id = r.c->>'tool_call_id'
          LEFT JOIN helix.tool_call_answers a ON a.session_num = cur.num AND a.tool_call_id = r.c->>'tool_call_id'
         WHERE pc.kind = 'client';
    END IF;

    -- The step's events (those no earlier write put in the stream, by key, unless p.fresh),
    -- step_finish with the client tools' waits, and the interrupt that ends the run here.
    evs := COALESCE(p->'events', '[]'::jsonb);
    IF NOT fresh THEN
        evs := helix.unwritten_events(cur.num, step_no, evs);
    END IF;
    IF waits IS NOT NULL THEN
        SELECT jsonb_agg(CASE WHEN t.e->>'key' = finish_key THEN jsonb_set(t.e, '{data,usage,waits}', waits)
                              ELSE t.e END ORDER BY t.ord)
          INTO evs
          FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);
    END IF;
    IF interrupted THEN
        evs := evs || jsonb_build_array(jsonb_build_object(
            'type', 'interrupted', 'data', jsonb_build_object('step', step_no),
            'key', run_no || '.' || step_no || '.interrupted'));
    END IF;
    last_seq := helix.insert_events(cur.num, run_no, step_no, evs);
    IF term IS NULL AND NOT interrupted AND jsonb_typeof(p->'next_step') = 'object' THEN
        last_seq := helix.insert_events(cur.num, run_no, step_no + 1, jsonb_build_array(p->'next_step'));
    END IF;

    UPDATE helix.sessions
       SET step_count = step_no, message_count = message_count + n_msgs,
           event_seq = last_seq,
           status = new_status,
           output = CASE WHEN term IS NOT NULL AND term->>'status' = 'completed' THEN term->'output'
                         ELSE output END,
           error = CASE WHEN term IS NOT NULL THEN term->>'error' ELSE NULL END,
           stop_reason = CASE WHEN term IS NOT NULL THEN term->>'stop_reason'
                              WHEN interrupted THEN 'interrupted' ELSE stop_reason END,
           interrupt_requested = interrupt_requested AND NOT interrupted AND term IS NULL,
           updated_at = CASE WHEN new_status <> cur.status THEN now() ELSE updated_at END
     WHERE id = sid;

    PERFORM helix.insert_messages(cur.num, cur.message_count, run_no, step_no, COALESCE(p->'messages', '[]'::jsonb));
    PERFORM helix.insert_state_patch(cur.num, step_no, 0::smallint, run_no, p->'patch');
    IF jsonb_typeof(p->'snapshot') = 'object' THEN
        INSERT INTO helix.state_snapshots (session_num, step, state) VALUES (cur.num, step_no, p->'snapshot');
    END IF;

    IF NOT new_status = ANY (helix.active_statuses()) THEN
        UPDATE helix.runs
           SET status = new_status,
               error = term->>'error',
               stop_reason = CASE WHEN interrupted THEN 'interrupted' ELSE term->>'stop_reason' END,
               end_step = step_no, ended_at = now()
         WHERE session_num = cur.num AND run = run_no;
    END IF;
    DELETE FROM helix.tool_outcomes WHERE session_num = cur.num AND step = step_no;
    DELETE FROM helix.tool_attempts WHERE session_num = cur.num AND step = step_no;
    RETURN jsonb_build_object('interrupted', interrupted);
END;
$$;
