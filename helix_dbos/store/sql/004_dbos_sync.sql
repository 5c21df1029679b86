-- One truth for a run: helix's session and run rows follow DBOS's workflow status,
-- whichever tool changed it (helix, DBOS's API, `dbos workflow cancel|resume`, Conductor).
-- And nothing pickled ever reaches a helix workflow.
--
-- The triggers live on DBOS's own tables (schema dbos), in the same database: helix
-- requires its tables to live in the DBOS system database. helix.install_dbos_hooks()
-- (re)creates them; `helix-dbos migrate` and every executor call it after DBOS's own
-- migrations, so a `dbos reset` or a DBOS upgrade that recreates a table is healed.

-- Make run run_no of a session active again after DBOS resumed its workflow: the calls
-- it was waiting for are pending again, and one `resumed` event says so. Returns the new
-- status, or NULL (writing nothing) when the run is not the session's latest or is active.
CREATE FUNCTION helix.reopen_run(sid text, run_no integer, wf text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    new_status text;
    cur_step integer;
BEGIN
    PERFORM 1 FROM helix.sessions
     WHERE id = sid AND run_count = run_no AND NOT status = ANY (helix.active_statuses()) FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE helix.pending_tool_calls SET status = 'pending'
     WHERE session_id = sid AND run = run_no AND status = 'cancelled';
    SELECT CASE WHEN bool_or(kind = 'approval') THEN 'awaiting_approval'
                WHEN count(*) > 0 THEN 'awaiting_client_tool' ELSE 'active' END
      INTO new_status
      FROM helix.pending_tool_calls WHERE session_id = sid AND run = run_no AND status = 'pending';
    UPDATE helix.sessions
       SET status = new_status, error = NULL, stop_reason = NULL, interrupt_requested = false,
           version = version + 1, updated_at = now()
     WHERE id = sid
    RETURNING step_count INTO cur_step;
    UPDATE helix.runs SET status = 'active', error = NULL, stop_reason = NULL, end_step = NULL, ended_at = NULL
     WHERE session_id = sid AND run = run_no;
    PERFORM helix.append_events(sid, run_no, cur_step,
        jsonb_build_array(jsonb_build_object('type', 'resumed',
                                             'data', jsonb_build_object('run', run_no, 'workflow_id', wf))));
    RETURN new_status;
END;
$$;

-- After DBOS changes the status of a helix run's workflow. It never raises: a failure
-- here must not break DBOS's own operation, so it is reported as a WARNING instead.
CREATE FUNCTION helix.follow_dbos_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT session_id, run INTO r FROM helix.runs WHERE workflow_id = NEW.workflow_uuid;
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

-- Refuse a message to a helix topic that is not portable JSON: DBOS would unpickle it.
CREATE FUNCTION helix.refuse_pickled_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'helix: messages to helix topics must be portable JSON (serialization_type=PORTABLE), not %',
        COALESCE(NEW.serialization, 'the default (pickle)')
        USING ERRCODE = 'invalid_parameter_value';
END;
$$;

-- Refuse a helix run whose input is not portable JSON: DBOS would unpickle it.
CREATE FUNCTION helix.refuse_pickled_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'helix: helix_agent_run takes portable JSON input (serialization_type=PORTABLE), not %',
        COALESCE(NEW.serialization, 'the default (pickle)')
        USING ERRCODE = 'invalid_parameter_value';
END;
$$;

CREATE FUNCTION helix.install_dbos_hooks() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('dbos.workflow_status') IS NULL OR to_regclass('dbos.notifications') IS NULL THEN
        RAISE EXCEPTION 'helix: DBOS''s system tables are not in this database (run DBOS''s migrations first)';
    END IF;
    CREATE OR REPLACE TRIGGER helix_follow_status
        AFTER UPDATE OF status ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name = 'helix_agent_run' AND OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION helix.follow_dbos_status();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_message
        BEFORE INSERT ON dbos.notifications
        FOR EACH ROW WHEN (NEW.topic LIKE 'helix.%' AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_message();
    CREATE OR REPLACE TRIGGER helix_refuse_pickled_run
        BEFORE INSERT ON dbos.workflow_status
        FOR EACH ROW WHEN (NEW.name = 'helix_agent_run' AND NEW.serialization IS DISTINCT FROM 'portable_json')
        EXECUTE FUNCTION helix.refuse_pickled_run();
END;
$$;
