-- The events of evs ([{type, data, key}]), all of step step_no, whose key is neither in
-- the stream of session number snum at that step nor on an earlier event of evs; events without a key
-- are all kept. Each key is looked up in stream_step_key_idx on its own (012, 014, 016): a NOT
-- EXISTS inside an OR was planned as a hash of every key of the session, so each keyed
-- write read the session's whole stream. plpgsql, not sql: a SQL function whose body has
-- a FROM is planned again by every statement that calls it (about 0.19 ms, four times a
-- turn, inside DBOS's checkpoint transactions); plpgsql keeps the plan on the connection.
CREATE OR REPLACE FUNCTION helix.unwritten_events(snum bigint, step_no integer, evs jsonb)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT COALESCE(jsonb_agg(t.e ORDER BY t.ord), '[]'::jsonb)
        FROM jsonb_array_elements(evs) WITH ORDINALITY AS t(e, ord)
        CROSS JOIN LATERAL (
            SELECT count(*) AS n FROM helix.stream x
             WHERE x.session_num = snum AND x.step = step_no AND x.key = t.e->>'key'
        ) AS written
        WHERE t.e->>'key' IS NULL
           OR written.n = 0
          AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(evs) WITH ORDINALITY AS u(e, ord)
                           WHERE u.ord < t.ord AND u.e->>'key' = t.e->>'key')
    );
END;
$$;
