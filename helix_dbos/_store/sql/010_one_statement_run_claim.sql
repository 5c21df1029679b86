-- A run is claimed with one statement, helix.claim_run, where it took about ten (the
-- session's row locked, the session made when new, the session reopened, the user's
-- message, the run's row, its run_start and first step_start events, each its own round
-- trip from Python). The run's workflow also gets, in the same call, the queue DBOS placed
-- it on and the transcript and state the run starts from, so its first transaction reads
-- nothing else. helix.insert_session becomes the one writer of new session rows (the claim
-- and a sub-agent's session made for its parent's call both use it). A worker of the
-- previous release keeps claiming as it did; both write the same rows.

-- Make session sid (its step-0 state initial_state, when not NULL) and return its number,
-- or NULL when a session of that id exists (nothing written). It takes its number first, so
-- a root session (root = sid) names itself as its root. A root session's owner is
-- owner_name; any other session takes its root's.
CREATE FUNCTION helix.insert_session(
    sid text, agent text, root text, parent text, ptc text, owner_name text, initial_state jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := nextval(pg_get_serial_sequence('helix.sessions', 'num'));
BEGIN
    INSERT INTO helix.sessions (num, id, agent_name, root_session_num, parent_session_num, parent_tool_call_id, owner)
    VALUES (n, sid, agent,
            CASE WHEN root = sid THEN n ELSE helix.session_num(root) END,
            helix.session_num(parent), ptc,
            CASE WHEN root = sid THEN owner_name ELSE (SELECT owner FROM helix.sessions WHERE id = root) END)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF initial_state IS NOT NULL THEN
        INSERT INTO helix.state_snapshots (session_num, step, state) VALUES (n, 0, initial_state);
    END IF;
    RETURN n;
END;
$$;

-- The first __finish__ call of the session's last assistant message that no later tool
-- result answers (NULL: none). A history written by the first release can end so; the
-- claim of the next run pairs it before the user's new message.
CREATE FUNCTION helix.unpaired_finish_call(snum bigint) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT c.call->>'id'
      FROM (SELECT seq, message FROM helix.messages
             WHERE session_num = snum AND message->>'role' = 'assistant' ORDER BY seq DESC LIMIT 1) a,
           jsonb_array_elements(COALESCE(a.message->'tool_calls', '[]'::jsonb)) WITH ORDINALITY AS c(call, ord)
     WHERE c.call->>'name' = '__finish__'
       AND NOT EXISTS (SELECT 1 FROM helix.messages t
                        WHERE t.session_num = snum AND t.seq > a.seq AND t.message->>'role' = 'tool'
                          AND t.message->>'tool_call_id' = c.call->>'id')
     ORDER BY c.ord LIMIT 1
$$;

-- Claim run p.run of session p.session_id, or find it claimed already (both the caller that
-- started the run's workflow and the workflow's first transaction call it; the first one
-- writes). p: session_id, run, kind ('execute' or 'resume'), agent_name, owner,
-- root_session_id, parent_session_id, parent_tool_call_id, initial_state (the state at step
-- 0 of a new session, or null), workflow_id (the run's own), input (the messages the run
-- adds: the user's, or none), finish_result (the tool result that pairs a dangling
-- __finish__ call, its tool_call_id filled in here), run_start (the event row), context
-- (true: also return the transcript and state the run starts from).
--
-- Returns one of:
--   {"apart": true}                      DBOS does not know p.workflow_id in this database
--   {"missing": true}                    p.kind is resume and there is no such session
--   {"busy": run_count}                  another run holds the session
--   {"parent": id, "call": id}           the session is not p's sub-agent session (refused)
--   {"step_count", "message_seq", "start_seq", "queue"} and, with p.context, "messages"
--   (the transcript before message_seq), "snapshot" ({step, state}: the latest at or
--   before step_count, or null) and "patches" (the state patches after it up to step_count).
CREATE FUNCTION helix.claim_run(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    sid text := p->>'session_id';
    run_no integer := (p->>'run')::integer;
    init jsonb := NULLIF(p->'initial_state', 'null'::jsonb);
    placement jsonb;
    cur helix.sessions%ROWTYPE;
    parent_id text;
    begun helix.runs%ROWTYPE;
    dangling text;
    msgs jsonb := COALESCE(p->'input', '[]'::jsonb);
    first_step integer;
    last_seq bigint;
    claim jsonb;
    snap helix.state_snapshots%ROWTYPE;
BEGIN
    placement := helix.workflow_placement(p->>'workflow_id');  -- _store/dbos_tables.py makes it
    IF placement IS NULL THEN
        RETURN jsonb_build_object('apart', true);
    END IF;

    SELECT * INTO cur FROM helix.sessions WHERE id = sid FOR UPDATE;
    IF NOT FOUND THEN
        IF p->>'kind' = 'resume' THEN
            RETURN jsonb_build_object('missing', true);
        END IF;
        PERFORM helix.insert_session(sid, p->>'agent_name', COALESCE(p->>'root_session_id', sid),
                                     p->>'parent_session_id', p->>'parent_tool_call_id', p->>'owner', init);
        SELECT * INTO STRICT cur FROM helix.sessions WHERE id = sid FOR UPDATE;  -- ours, or a concurrent claim's
    END IF;
    IF p->>'parent_session_id' IS NOT NULL THEN
        SELECT id INTO parent_id FROM helix.sessions WHERE num = cur.parent_session_num;
        IF (parent_id, cur.parent_tool_call_id) IS DISTINCT FROM (p->>'parent_session_id', p->>'parent_tool_call_id') THEN
            RETURN jsonb_build_object('parent', parent_id, 'call', cur.parent_tool_call_id);
        END IF;
    END IF;

    IF cur.run_count = run_no THEN
        SELECT * INTO begun FROM helix.runs WHERE session_num = cur.num AND run = run_no;
    END IF;
    IF begun.run IS NOT NULL THEN
        IF init IS NOT NULL AND run_no = 1 THEN
            INSERT INTO helix.state_snapshots (session_num, step, state) VALUES (cur.num, 0, init) ON CONFLICT DO NOTHING;
        END IF;
        claim := jsonb_build_object('step_count', begun.start_step, 'message_seq', cur.message_count,
                                    'start_seq', begun.start_seq);
    ELSIF NOT (cur.run_count = 0 AND cur.status = 'active')
          AND (cur.status = ANY (helix.active_statuses()) OR cur.run_count >= run_no) THEN
        RETURN jsonb_build_object('busy', cur.run_count);
    ELSE
        IF p->>'kind' = 'execute' AND cur.message_count > 0 THEN
            dangling := helix.unpaired_finish_call(cur.num);
            IF dangling IS NOT NULL THEN
                msgs := jsonb_build_array(jsonb_set(p->'finish_result', '{tool_call_id}', to_jsonb(dangling))) || msgs;
            END IF;
        END IF;
        PERFORM helix.insert_messages(cur.num, cur.message_count, run_no, cur.step_count, msgs);
        first_step := cur.step_count + 1;  -- the first step's step_start; the next ones come with each commit
        INSERT INTO helix.runs (session_num, run, workflow_id, kind, start_step, start_seq)
        VALUES (cur.num, run_no, p->>'workflow_id', p->>'kind', cur.step_count, cur.event_seq + 1);
        last_seq := helix.insert_events(cur.num, run_no, cur.step_count, jsonb_build_array(p->'run_start'));
        last_seq := helix.insert_events(cur.num, run_no, first_step, jsonb_build_array(jsonb_build_object(
            'type', 'step_start', 'data', jsonb_build_object('step', first_step),
            'key', run_no || '.' || first_step || '.step_start')));
        UPDATE helix.sessions
           SET status = 'active', run_count = run_no, error = NULL, stop_reason = NULL, interrupt_requested = false,
               message_count = message_count + jsonb_array_length(msgs), event_seq = last_seq, updated_at = now()
         WHERE num = cur.num;
        claim := jsonb_build_object('step_count', cur.step_count,
                                    'message_seq', cur.message_count + jsonb_array_length(msgs),
                                    'start_seq', cur.event_seq + 1);
    END IF;
    claim := claim || placement;

    IF COALESCE((p->>'context')::boolean, false) THEN
        SELECT * INTO snap FROM helix.state_snapshots
         WHERE session_num = cur.num AND step <= (claim->>'step_count')::integer ORDER BY step DESC LIMIT 1;
        claim := claim || jsonb_build_object(
            'messages', (SELECT COALESCE(jsonb_agg(message ORDER BY seq), '[]'::jsonb) FROM helix.messages
                          WHERE session_num = cur.num AND seq < (claim->>'message_seq')::integer),
            'snapshot', CASE WHEN snap.step IS NULL THEN NULL
                             ELSE jsonb_build_object('step', snap.step, 'state', snap.state) END,
            'patches', (SELECT COALESCE(jsonb_agg(patch ORDER BY step, part), '[]'::jsonb) FROM helix.state_patches
                         WHERE session_num = cur.num AND step > snap.step
                           AND step <= (claim->>'step_count')::integer));
    END IF;
    RETURN claim;
END;
$$;
