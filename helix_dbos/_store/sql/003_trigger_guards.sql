-- helix never breaks DBOS's own writes: every function a helix trigger on a dbos.* table
-- calls to write helix's tables catches its own failure (a WARNING naming what failed)
-- and returns, so DBOS's write commits; what the trigger missed is made up by the next
-- one who meets the workflow (below). The refusal of pickled rows (helix.refuse_pickled)
-- refuses on purpose and writes nothing of helix's: it keeps no guard.

-- Where a workflow stands among the workflows that hold a run in turn: the run's own
-- (helix:<s>:run:<n>) first, then for each step k it parked at, its waiter (...:wait:<k>)
-- and then its continuation (...:step:<k>).
CREATE FUNCTION helix.run_workflow_place(wf text) RETURNS integer LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    m text[];
BEGIN
    m := regexp_match(wf, ':(wait|step):([0-9]+)$');
    IF m IS NULL THEN
        RETURN 0;
    END IF;
    RETURN 2 * m[2]::integer + CASE m[1] WHEN 'wait' THEN 0 ELSE 1 END;
END;
$$;

-- The run of a waiter or continuation workflow wf names wf as the workflow that holds it
-- now (helix.runs.workflow_id), unless it names a later one already. Called in DBOS's
-- transaction that creates wf (helix_follow_new_workflow), and again, should that have
-- failed, when DBOS changes wf's status (helix.follow_dbos_status) and in wf's own first
-- transaction (the waiter's collect_answers, the continuation's continue_run).
CREATE FUNCTION helix.follow_run_workflow(wf text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    m text[];
BEGIN
    m := regexp_match(wf, '^helix:(.*):run:([0-9]+):(wait|step):[0-9]+$');
    IF m IS NULL THEN
        RETURN;
    END IF;
    UPDATE helix.runs u SET workflow_id = wf
      FROM helix.sessions s
     WHERE s.id = m[1] AND u.session_num = s.num AND u.run = m[2]::integer
       AND helix.run_workflow_place(u.workflow_id) < helix.run_workflow_place(wf);
END;
$$;

-- After DBOS creates a workflow of a helix run, its waiter or continuation: the run names
-- it (helix.follow_run_workflow), in the same transaction. It never raises.
CREATE OR REPLACE FUNCTION helix.follow_new_run_workflow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM helix.follow_run_workflow(NEW.workflow_uuid);
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'helix: could not make new workflow % the workflow of its run: %', NEW.workflow_uuid, SQLERRM;
    RETURN NULL;
END;
$$;

-- After DBOS changes the status of a workflow of a helix run: first make up a missed
-- helix_follow_new_workflow (a continuation that waited on its queue, then started,
-- failed or was cancelled), then CANCELLED ends the run aborted, ERROR ends it failed,
-- CANCELLED/ERROR -> ENQUEUED/PENDING reopens it. It never raises: a failure here must
-- not break DBOS's own operation, so it is a WARNING.
CREATE OR REPLACE FUNCTION helix.follow_dbos_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    PERFORM helix.follow_run_workflow(NEW.workflow_uuid);
    SELECT s.id AS session_id, u.run INTO r
      FROM helix.runs u JOIN helix.sessions s ON s.num = u.session_num WHERE u.workflow_id = NEW.workflow_uuid;
    IF NOT FOUND THEN
        RETURN NULL;  -- not started yet, or a copy made by `dbos workflow fork` (it refuses to run)
    END IF;
    IF NEW.status = 'CANCELLED' THEN
        PERFORM helix.end_run(r.session_id, r.run, 'aborted', 'the run''s workflow was cancelled', 'aborted',
            jsonb_build_object('type', 'aborted', 'data', jsonb_build_object('reason', 'workflow cancelled')));
    ELSIF NEW.status IN ('ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') THEN
        PERFORM helix.end_run(r.session_id, r.run, 'failed', 'the run''s workflow ended ' || NEW.status, 'error',
            jsonb_build_object('type', 'error',
                               'data', jsonb_build_object('error', 'workflow ended ' || NEW.status, 'stop_reason', 'error')));
    ELSIF NEW.status IN ('ENQUEUED', 'PENDING')
          AND OLD.status IN ('CANCELLED', 'ERROR', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') THEN
        PERFORM helix.reopen_run(r.session_id, r.run, NEW.workflow_uuid);
    END IF;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'helix: could not follow workflow % to status %: %', NEW.workflow_uuid, NEW.status, SQLERRM;
    RETURN NULL;
END;
$$;
