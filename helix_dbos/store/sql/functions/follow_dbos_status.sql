-- After DBOS changes the status of a helix run's workflow. It never raises: a failure
-- here must not break DBOS's own operation, so it is reported as a WARNING instead.
CREATE OR REPLACE FUNCTION helix.follow_dbos_status() RETURNS trigger LANGUAGE plpgsql AS $$
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
