-- Event seqs continue from the stream itself, and a checkpoint's carried events no longer
-- write the session row (issue 19).
--
-- Every writer of a session's events holds the session row (FOR UPDATE) and numbers them
-- from the last seq in helix.events (helix.last_event_seq, one step back along
-- events_pkey), no longer from sessions.event_seq: the stream stays 1..N without gaps, in
-- commit order, as before. The events a step's checkpoints carry (012) are written
-- without touching sessions.event_seq; the step's commit, which follows, brings it level.
-- That was an UPDATE of the session row in each LLM and tool checkpoint: three new row
-- versions per turn, which Postgres could not prune while a DBOS transaction held the
-- xmin horizon back, so helix.sessions grew with every turn. A row lock writes no new
-- version. Every other writer still sets event_seq, so it is exact whenever no step is
-- half written: at every run's start and end, which is where it is read.

-- The last seq of the session's stream (0 when it has none).
CREATE FUNCTION helix.last_event_seq(sid text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT seq FROM helix.events WHERE session_id = sid ORDER BY seq DESC LIMIT 1), 0);
$$;

-- Append evs ([{type, data, key}]) after the stream's last event; returns the new last
-- seq. The caller holds the session row.
CREATE FUNCTION helix.insert_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint := helix.last_event_seq(sid);
BEGIN
    INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
    SELECT sid, last_seq + t.ord, run_no, step_no, t.e->>'type', COALESCE(t.e->'data', '{}'::jsonb), t.e->>'key'
    FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord);
    RETURN last_seq + COALESCE(jsonb_array_length(evs), 0);
END;
$$;

-- The caller must hold the session row (FOR UPDATE or a prior UPDATE in the same tx).
CREATE OR REPLACE FUNCTION helix.append_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    last_seq bigint := helix.insert_events(sid, run_no, step_no, evs);
BEGIN
    UPDATE helix.sessions SET event_seq = last_seq WHERE id = sid;
    RETURN last_seq;
END;
$$;

-- Lock the session row and append the keyed events of evs not in the stream yet; returns
-- how many it wrote. sessions.event_seq is left as it was.
CREATE FUNCTION helix.insert_unwritten_events(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    fresh jsonb;
BEGIN
    PERFORM 1 FROM helix.sessions WHERE id = sid FOR UPDATE;
    fresh := helix.unwritten_events(sid, evs);
    IF jsonb_array_length(fresh) > 0 THEN
        PERFORM helix.insert_events(sid, run_no, step_no, fresh);
    END IF;
    RETURN jsonb_array_length(fresh);
END;
$$;

-- As in 008: returns how many it wrote.
CREATE OR REPLACE FUNCTION helix.append_events_once(sid text, run_no integer, step_no integer, evs jsonb)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := helix.insert_unwritten_events(sid, run_no, step_no, evs);
BEGIN
    IF n > 0 THEN
        UPDATE helix.sessions SET event_seq = helix.last_event_seq(sid) WHERE id = sid;
    END IF;
    RETURN n;
END;
$$;

-- As in 012, without writing the session row (see the top of this file).
CREATE OR REPLACE FUNCTION helix.write_carried_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    output jsonb := NEW.output::jsonb;
    carried jsonb := output->'helix_events';
BEGIN
    IF jsonb_typeof(carried) IS DISTINCT FROM 'object' THEN
        RETURN NEW;  -- not a helix step's output after all: saved as it came
    END IF;
    IF EXISTS (SELECT 1 FROM helix.sessions WHERE id = carried->>'session_id') THEN
        PERFORM helix.insert_unwritten_events(carried->>'session_id', (carried->>'run')::integer,
                                              (carried->>'step')::integer, carried->'events');
    END IF;
    NEW.output := (output - 'helix_events')::text;
    RETURN NEW;
END;
$$;

-- As in 008, with the parent's seqs from its stream.
CREATE OR REPLACE FUNCTION helix.relay_child_events() RETURNS trigger LANGUAGE plpgsql AS $$
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
        PERFORM 1 FROM helix.sessions WHERE id = par.id AND status = ANY (helix.active_statuses()) FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        last_seq := helix.last_event_seq(par.id);
        INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
        SELECT par.id, last_seq + row_number() OVER (ORDER BY r.session_id, r.seq),
               p.run_count, p.step_count + 1, 'subagent_event',
               jsonb_build_object('session_id', r.session_id,
                                  'event', jsonb_build_object('seq', r.seq, 'type', r.type, 'data', r.data)),
               'sub:' || r.session_id || ':' || r.seq
          FROM new_rows r
          JOIN helix.sessions s ON s.id = r.session_id
          JOIN helix.sessions p ON p.id = par.id
         WHERE s.parent_session_id = par.id AND r.run = 1;
        UPDATE helix.sessions SET event_seq = last_seq + par.n WHERE id = par.id;
    END LOOP;
    RETURN NULL;
END;
$$;

-- As in 012, with the step's seqs from the stream.
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
    last_seq := helix.last_event_seq(sid);
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

    -- seqs continue from the stream's last, read under the row lock;
    -- the next step's step_start, last, belongs to that step
    INSERT INTO helix.events (session_id, seq, run, step, type, data, key)
    SELECT sid, last_seq + t.ord, run_no, step_no + (t.ord > n_own)::integer, t.e->>'type',
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
