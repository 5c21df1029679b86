-- A step's commit, leaner: no trigger of helix's fires on helix's own tables when a step
-- commits, and the session's new status comes decided from Python.
--
-- The stream's one writer does its own follow-up: helix.insert_events wakes the stream's
-- readers and relays a sub-agent's events into its parent's stream itself, which two
-- statement triggers on helix.events did (dropped below). Every write of an event, by
-- this release or the previous one, goes through helix.insert_events, so both keep
-- waking readers and relaying while a deploy rolls.

-- Relay events first_seq..last_seq of sub-agent session child_num (its first run's) into
-- the stream of its parent as subagent_event, keyed 'sub:<child>:<seq>', at the parent's
-- step in progress, while the parent has a run in progress (checked under the parent's row
-- lock). Relayed rows are events too, so a grandchild's reach the root. Locks go child to
-- parent only.
CREATE FUNCTION helix.relay_to_parent(child_num bigint, parent_num bigint, first_seq bigint, last_seq bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    at_run integer;
    at_step integer;
    relayed jsonb;
BEGIN
    SELECT run_count, step_count INTO at_run, at_step
      FROM helix.sessions WHERE num = parent_num AND status = ANY (helix.active_statuses()) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT jsonb_agg(jsonb_build_object(
               'type', 'subagent_event',
               'data', jsonb_build_object('session_id', s.id,
                                          'event', jsonb_build_object('seq', e.seq, 'type', e.type, 'data', e.data)),
               'key', 'sub:' || s.id || ':' || e.seq) ORDER BY e.seq)
      INTO relayed
      FROM helix.events e JOIN helix.sessions s ON s.num = e.session_num
     WHERE e.session_num = child_num AND e.seq BETWEEN first_seq AND last_seq;
    UPDATE helix.sessions SET event_seq = helix.insert_events(parent_num, at_run, at_step + 1, relayed)
     WHERE num = parent_num;
END;
$$;

-- The one writer of helix.events: append evs ([{type, data, key}]) after the stream's
-- last event, at step step_no; returns the new last seq. The caller holds the session row
-- (FOR UPDATE or an earlier UPDATE in its transaction), so seqs commit in order. It wakes
-- the stream's readers in any process (NOTIFY helix_events with the session's id; Postgres
-- sends one per transaction and session) and relays a sub-agent's first run's events to
-- its parent (helix.relay_to_parent).
CREATE OR REPLACE FUNCTION helix.insert_events(snum bigint, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint := helix.last_event_seq(snum);
    n integer := COALESCE(jsonb_array_length(evs), 0);
    sid text;
    parent_num bigint;
BEGIN
    IF n = 0 THEN
        RETURN last_seq;
    END IF;
    INSERT INTO helix.events (session_num, seq, run, step, type, data, key)
    SELECT snum, last_seq + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);
    SELECT id, parent_session_num INTO sid, parent_num FROM helix.sessions WHERE num = snum;
    PERFORM pg_notify('helix_events', sid);
    IF run_no = 1 AND parent_num IS NOT NULL THEN
        PERFORM helix.relay_to_parent(snum, parent_num, last_seq + 1, last_seq + n);
    END IF;
    RETURN last_seq + n;
END;
$$;

-- Append the keyed events of evs that are not in the session's stream yet, while run
-- run_no is in progress, and bring sessions.event_seq level; returns how many it wrote.
-- Workflow code calls it, one autocommit statement, once the source of the events is
-- checkpointed, so a replay that derives the same events under the same keys writes
-- nothing. A run that has ended (aborted from another process, say) gets nothing more
-- after its terminal event, so its stream still ends with it.
CREATE OR REPLACE FUNCTION helix.append_events_once(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    snum bigint;
    fresh jsonb;
    last_seq bigint;
BEGIN
    SELECT num INTO snum FROM helix.sessions
     WHERE id = sid AND run_count = run_no AND status = ANY (helix.active_statuses()) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;  -- the run has ended, or the session was pruned
    END IF;
    fresh := helix.unwritten_events(snum, step_no, evs);
    IF jsonb_array_length(fresh) = 0 THEN
        RETURN 0;
    END IF;
    last_seq := helix.insert_events(snum, run_no, step_no, fresh);
    UPDATE helix.sessions SET event_seq = last_seq WHERE num = snum;
    RETURN jsonb_array_length(fresh);
END;
$$;

-- A step's commit takes the session's new status from the caller: p.status, and
-- p.status_if_interrupted when an interrupt is pending (helix_dbos.orchestration.status
-- decides both); it compare-and-sets the one that applies. A payload without them (a
-- worker of the previous release) gets the same statuses from p.terminal. Otherwise as
-- before: see 001_baseline.sql for what it writes and when it refuses.
CREATE OR REPLACE FUNCTION helix.commit_step(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    sid text := p->>'session_id';
    run_no integer := (p->>'run')::integer;
    step_no integer := (p->>'step')::integer;
    finish_key text := (p->>'run') || '.' || (p->>'step') || '.step_finish';
    term jsonb := NULLIF(p->'terminal', 'null'::jsonb);
    go_on text := COALESCE(p->>'status', term->>'status', 'active');
    if_interrupted text := COALESCE(p->>'status_if_interrupted', term->>'status', 'interrupted');
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

    -- The step's events no earlier write put in the stream (by key), step_finish with the
    -- client tools' waits, and the interrupt that ends the run here.
    SELECT COALESCE(jsonb_agg(CASE WHEN waits IS NOT NULL AND t.e->>'key' = finish_key
                                   THEN jsonb_set(t.e, '{data,usage,waits}', waits) ELSE t.e END ORDER BY t.ord),
                    '[]'::jsonb)
      INTO evs
      FROM jsonb_array_elements(helix.unwritten_events(cur.num, step_no, COALESCE(p->'events', '[]'::jsonb)))
           WITH ORDINALITY AS t(e, ord);
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
    RETURN jsonb_build_object('interrupted', interrupted);
END;
$$;

DROP TRIGGER events_notify ON helix.events;
DROP TRIGGER events_relay_to_parent ON helix.events;
DROP FUNCTION helix.notify_event();
DROP FUNCTION helix.relay_child_events();
