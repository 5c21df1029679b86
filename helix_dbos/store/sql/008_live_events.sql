-- Live events (issue 15): a step's events are written when they happen, not only at its
-- commit, still exactly once and gap-free per session (see docs/architecture.md, "The
-- durable event stream").
--
-- Events a step writes carry a key, unique in their session: '<run>.<step>.<part>', e.g.
-- '1.2.step_start', '1.2.call:t1', '1.2.result:t1'. Workflow code writes each event as soon
-- as its source is checkpointed (helix.append_events_once, a plain autocommit statement),
-- so a replay after a crash derives the same events with the same keys and writes
-- nothing. The commit (helix.commit_step, still one transaction) gets all the step's keyed
-- events and writes only those no earlier write put in the stream. Seqs are assigned
-- under the session row's lock in the inserting transaction, so the stream stays 1..N
-- without gaps, in commit order. Events written otherwise (run_start, approval requests,
-- interrupted, aborted, a hook save's state_patch) have no key: each comes from one
-- checkpointed transaction.
ALTER TABLE helix.events ADD COLUMN key text;
CREATE UNIQUE INDEX events_key_idx ON helix.events (session_id, key) WHERE key IS NOT NULL;

-- The events of evs ([{type, data, key}]) whose key is neither in the session's stream
-- nor on an earlier event of evs; events without a key are all kept.
CREATE FUNCTION helix.unwritten_events(sid text, evs jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT COALESCE(jsonb_agg(t.e ORDER BY t.ord), '[]'::jsonb)
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord)
    WHERE t.e->>'key' IS NULL
       OR NOT EXISTS (SELECT 1 FROM helix.events x WHERE x.session_id = sid AND x.key = t.e->>'key')
      AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(evs) WITH ORDINALITY AS u(e, ord)
                       WHERE u.ord < t.ord AND u.e->>'key' = t.e->>'key');
$$;

-- Append the keyed events evs that are not in the stream yet; returns how many it wrote.
-- It locks the session row first, so two writers never both find a key missing.
CREATE FUNCTION helix.append_events_once(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    fresh jsonb;
BEGIN
    PERFORM 1 FROM helix.sessions WHERE id = sid FOR UPDATE;
    fresh := helix.unwritten_events(sid, evs);
    IF jsonb_array_length(fresh) = 0 THEN
        RETURN 0;
    END IF;
    WITH s AS (UPDATE helix.sessions SET event_seq = event_seq + jsonb_array_length(fresh) WHERE id = sid
               RETURNING event_seq)
    INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
    SELECT sid, (SELECT event_seq FROM s) - jsonb_array_length(fresh) + t.ord, run_no, step_no, t.e->>'type',
           COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(fresh) WITH ORDINALITY AS t(e, ord);
    RETURN jsonb_array_length(fresh);
END;
$$;

-- A sub-agent's events reach its parent's stream as they are written: each event of a
-- child session's first run (the run its parent dispatched) is relayed, in the same
-- transaction, as a subagent_event of the parent's step in progress (keyed
-- 'sub:<child>:<seq>'), while the parent's run is in progress: a parent's run still ends
-- its stream with its terminal event (a child aborted with its parent is not relayed
-- after the parent's `aborted`). Relayed rows are events too, so a grandchild's reach the
-- root. Locks go from child to parent only (never the other way): no deadlock.
CREATE FUNCTION helix.relay_child_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    par record;
    last_seq bigint;
BEGIN
    FOR par IN
        SELECT s.parent_session_id AS id, count(*) AS n
          FROM new_rows r
          JOIN helix.sessions s ON s.id = r.session_id
          JOIN helix.sessions p ON p.id = s.parent_session_id
         WHERE r.run = 1 AND p.status = ANY (helix.active_statuses())
         GROUP BY s.parent_session_id ORDER BY s.parent_session_id
    LOOP
        -- re-checked under the row lock: a run that ended meanwhile takes no more events
        UPDATE helix.sessions SET event_seq = event_seq + par.n
         WHERE id = par.id AND status = ANY (helix.active_statuses()) RETURNING event_seq INTO last_seq;
        CONTINUE WHEN NOT FOUND;
        INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
        SELECT par.id, last_seq - par.n + row_number() OVER (ORDER BY r.session_id, r.seq),
               p.run_count, p.step_count + 1, 'subagent_event',
               jsonb_build_object('session_id', r.session_id,
                                  'event', jsonb_build_object('seq', r.seq, 'type', r.type, 'data', r.data)),
               'sub:' || r.session_id || ':' || r.seq
          FROM new_rows r
          JOIN helix.sessions s ON s.id = r.session_id
          JOIN helix.sessions p ON p.id = par.id
         WHERE s.parent_session_id = par.id AND r.run = 1;
    END LOOP;
    RETURN NULL;
END;
$$;
CREATE TRIGGER events_relay_to_parent AFTER INSERT ON helix.events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION helix.relay_child_events();

-- helix.commit_step as in 005, except that the step's events carry keys and only those not
-- written yet are appended.
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
    IF cur.step_count <> step_no - 1 OR cur.status NOT IN ('active', 'awaiting_approval', 'awaiting_client_tool') THEN
        RAISE EXCEPTION 'helix: session % is at step % with status %, cannot commit step %',
            sid, cur.step_count, cur.status, step_no USING ERRCODE = 'serialization_failure';
    END IF;
    interrupted := cur.interrupt_requested AND term IS NULL;
    -- Only the events no earlier write of this step put in the stream (by key).
    evs := helix.unwritten_events(sid, COALESCE(p->'events', '[]'::jsonb))
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
    RETURN jsonb_build_object('interrupted', interrupted);
END;
$$;
