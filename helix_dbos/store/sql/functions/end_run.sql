-- End a run that is still in progress: session and run rows take the final status, its
-- pending calls are cancelled, and one event says so. Returns false (and writes nothing)
-- when the run had already ended.
CREATE OR REPLACE FUNCTION helix.end_run(sid text, run_no integer, final_status text, err text,
                                         reason text, ev jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    cur_step integer;
BEGIN
    UPDATE helix.sessions
       SET status = final_status, error = err, stop_reason = reason,
           interrupt_requested = false, version = version + 1, updated_at = now()
     WHERE id = sid AND run_count = run_no AND status IN ('active', 'awaiting_approval', 'awaiting_client_tool')
    RETURNING step_count INTO cur_step;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE helix.runs
       SET status = final_status, error = err, stop_reason = reason, end_step = cur_step, ended_at = now()
     WHERE session_id = sid AND run = run_no;
    -- The run's gated calls can no longer be answered.
    UPDATE helix.pending_tool_calls SET status = 'cancelled'
     WHERE session_id = sid AND run = run_no AND status = 'pending';
    IF ev IS NOT NULL THEN
        PERFORM helix.append_events(sid, run_no, cur_step, jsonb_build_array(ev));
    END IF;
    RETURN true;
END;
$$;
