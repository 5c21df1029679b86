-- A sub-agent's events (its first run's) are relayed into its parent's stream as
-- subagent_event while the parent has a run in progress (008), numbered after the
-- parent's last seq under the parent's row lock (013). A trigger on helix.stream (016):
-- its rows name sessions by number.
CREATE OR REPLACE FUNCTION helix.relay_child_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    par record;
    last_seq bigint;
BEGIN
    FOR par IN
        SELECT p.num, count(*) AS n
          FROM new_rows r
          JOIN helix.sessions s ON s.num = r.session_num
          JOIN helix.sessions p ON p.id = s.parent_session_id
         WHERE r.run = 1 AND p.status = ANY (helix.active_statuses())
         GROUP BY p.num, p.id ORDER BY p.id
    LOOP
        -- re-checked under the row lock: a run that ended meanwhile takes no more events
        PERFORM 1 FROM helix.sessions WHERE num = par.num AND status = ANY (helix.active_statuses()) FOR UPDATE;
        CONTINUE WHEN NOT FOUND;
        last_seq := helix.last_event_seq(par.num);
        INSERT INTO helix.stream (session_num, seq, run, step, type, data, key)
        SELECT par.num, last_seq + row_number() OVER (ORDER BY s.id, r.seq),
               p.run_count, p.step_count + 1, 'subagent_event',
               jsonb_build_object('session_id', s.id,
                                  'event', jsonb_build_object('seq', r.seq, 'type', r.type, 'data', r.data)),
               'sub:' || s.id || ':' || r.seq
          FROM new_rows r
          JOIN helix.sessions s ON s.num = r.session_num
          JOIN helix.sessions p ON p.num = par.num
         WHERE s.parent_session_id = p.id AND r.run = 1;
        UPDATE helix.sessions SET event_seq = last_seq + par.n WHERE num = par.num;
    END LOOP;
    RETURN NULL;
END;
$$;
