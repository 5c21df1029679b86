-- Make run run_no of a session active again after DBOS resumed its workflow: the calls
-- it was waiting for are pending again, and one `resumed` event says so. Returns the new
-- status, or NULL (writing nothing) when the run is not the session's latest or is active.
CREATE OR REPLACE FUNCTION helix.reopen_run(sid text, run_no integer, wf text) RETURNS text
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
