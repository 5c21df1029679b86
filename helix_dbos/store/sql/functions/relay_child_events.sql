-- A sub-agent's events (its first run's) are relayed into its parent's stream as
-- subagent_event while the parent has a run in progress (008), numbered after the
-- parent's last seq under the parent's row lock (013).
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
